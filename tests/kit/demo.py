"""A finished demo read back: the cells of its printed summary and its materializations' metadata."""

import re

import dagster as dg


def printed(stdout: str, row: str) -> list[str]:
    """The summary's cells of `row`, one per mission, as printed."""
    match = re.search(rf"^{re.escape(row)}\s+(\S+)\s+(\S+)$", stdout, re.MULTILINE)
    assert match, f"no row {row!r} in:\n{stdout}"
    return [match.group(1), match.group(2)]


def latest_metadata(instance: dg.DagsterInstance, asset: str, mission: str) -> dict:
    records = instance.fetch_materializations(dg.AssetKey(asset), limit=100).records
    mine = [r for r in records if r.asset_materialization.metadata["mission"].value == mission]
    assert mine, f"no materialization of {asset} for {mission}"
    return {k: v.value for k, v in mine[0].asset_materialization.metadata.items()}
