import os
import tempfile

# Tests never write into the user's cache (machine ceilings and the like).
os.environ.setdefault("ALT_WORKBENCH_CACHE", tempfile.mkdtemp(prefix="alt-wb-cache-"))
