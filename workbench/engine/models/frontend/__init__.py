"""Importing real models (ONNX, torch.export, Python factories) into the engine's ``Graph``:
``sources`` reads and checks a model and runs TVM's frontend, ``convert`` maps the Relax
module onto the op library."""

from .sources import FORMATS, MAX_MODEL_MB, UPLOAD_FORMATS, Shapes, check_upload, export_factory, first_line, import_file, import_module, input_shapes, parse_input, read_model, store_upload

__all__ = ["FORMATS", "MAX_MODEL_MB", "UPLOAD_FORMATS", "Shapes", "check_upload", "export_factory", "first_line",
           "import_file", "import_module", "input_shapes", "parse_input", "read_model", "store_upload"]
