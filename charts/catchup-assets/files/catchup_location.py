"""Written by `catchup-assets demo`: the project's code location with this demo's resources."""

import json
from pathlib import Path

from catchup_assets.defs.location import definitions_with

defs = definitions_with(**json.loads((Path(__file__).parent / "catchup.json").read_text()))
