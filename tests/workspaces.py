"""A workspace file loaded as `dagster dev -w` loads it: shared by the workspace and demo tests."""

from pathlib import Path

import dagster as dg
from dagster._core.workspace.context import WorkspaceProcessContext
from dagster._core.workspace.load_target import WorkspaceFileTarget


def load_repository(workspace: Path, instance: dg.DagsterInstance):
    """Load the workspace in a code server process, as `dagster dev -w workspace` does."""
    with WorkspaceProcessContext(instance, WorkspaceFileTarget(paths=[str(workspace)])) as ctx:
        request = ctx.create_request_context()
        errors = request.code_location_errors()
        assert not errors, [e.message for e in errors]
        (name,) = request.code_location_names
        (repo,) = request.get_code_location(name).get_repositories().values()
        return name, repo
