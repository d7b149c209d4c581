"""ALT Workbench: explore tensor layouts and loop schedules together on Apache TVM."""

__version__ = "0.1.0"
