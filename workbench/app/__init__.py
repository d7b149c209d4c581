"""The Streamlit app: its entry script (``main``), the tab's state (``state``) and the helpers the
page scripts in ``workbench/pages/`` share. Nothing here is imported by the engine or the figure builders."""
