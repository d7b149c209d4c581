"""Streamlit pages (one per user task); thin: read the session, call the engine, show viz figures."""
