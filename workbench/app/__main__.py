"""``python -m workbench.app [streamlit flags]``: serve the app (``serve.serve``)."""

import sys

from workbench.app.serve import serve

serve(sys.argv[1:])
