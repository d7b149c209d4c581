"""Pure figure builders: engine data in, ``plotly.graph_objects.Figure`` out."""
