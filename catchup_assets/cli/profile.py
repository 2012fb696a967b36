"""`catchup-assets profile`: rebuild a mission's profile and tier map from its attempt records."""

from __future__ import annotations

import argparse


def command(args: argparse.Namespace) -> int:
    from catchup_assets.mission.plan import require_plan
    from catchup_assets.mission.profile import build_profile, build_tier_map
    from catchup_assets.store.root import Store

    require_plan(Store(args.root), args.mission)  # before anything is written
    out = build_profile(args.root, args.mission)
    _, tier_map_url = build_tier_map(args.root, args.mission)
    print(f"{out.profile.num_rows} measured ranges, {len(out.unmeasured)} unmeasured")
    print(f"profile   {out.url}\ntier map  {tier_map_url}")
    return 0
