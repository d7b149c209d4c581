"""Profile: per-kernel latency of the measured variants, the roofline of each kernel against
this machine's measured ceilings, and the cache profile of its loop nest."""

from __future__ import annotations

import pandas as pd
import streamlit as st

from workbench.pages import _state
from workbench.viz.kernels import latency_bars_figure

st.title("Profile")
state = _state.state()
_state.show_messages()

timings = _state.timings()
if timings:
    st.plotly_chart(latency_bars_figure(timings), width="stretch", key="latency_bars")
    st.dataframe(pd.DataFrame(_state.variants()), hide_index=True, width="stretch", key="profile_variants")
else:
    st.info("No variant measured yet: use **Build & measure** on the Loops page; each measured variant shows here.")
