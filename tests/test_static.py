"""Static checks that the test run would otherwise only reach through slow paths: a name used but
never bound (a lost import) fails here at once, not in the one benchmark test that calls it."""

from __future__ import annotations

from pathlib import Path

from pyflakes import api, messages, reporter

ROOT = Path(__file__).resolve().parent.parent
# TVMScript's buffer annotations, e.g. T.Buffer((4,), "float32"), read to pyflakes as forward references.
TVM_DTYPES = {"float32", "float16", "int32", "int64", "int8", "uint8", "bool"}


class _Collect(reporter.Reporter):
    def __init__(self) -> None:
        super().__init__(None, None)
        self.found: list[str] = []

    def flake(self, message: messages.Message) -> None:
        if isinstance(message, messages.UndefinedName) and message.message_args[0] not in TVM_DTYPES:
            self.found.append(str(message))

    def syntaxError(self, filename: str, msg: str, lineno: int, offset: int, text: str) -> None:
        self.found.append(f"{filename}:{lineno}: {msg}")

    def unexpectedError(self, filename: str, msg: str) -> None:
        self.found.append(f"{filename}: {msg}")


def test_no_module_uses_a_name_it_never_binds() -> None:
    collect = _Collect()
    for folder in ("workbench", "tests"):
        api.checkRecursive([str(ROOT / folder)], collect)
    assert collect.found == []
