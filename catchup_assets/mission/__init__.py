"""A mission's use cases without Dagster, one per module: what the CLI and the assets call.

plan (prepare, forecast, predict cost), saved (mission.json), run (dispatch),
profile (profile and tier map), ladder (the fitted tier ladder), diff (two
profiles compared); tip (where history ends) and report (what a mission cost).
Nothing here knows which backend runs the attempts; every path under the
storage root is store/layout.py's.
"""
