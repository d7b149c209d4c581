"""Everything that is not UI: graph, operators, layouts, propagation, lowering, loops,
measurement, tuning, profiles and sessions. Never imports Streamlit or Plotly."""
