"""The Slack Web API client the notification sensor posts with: dagster-slack's resource, its token optional.

`dagster_slack.SlackResource` requires a token and always talks to slack.com. Here the token
is empty when none is configured (notifications off: `notify_sensor` skips, saying so,
instead of failing every tick), and `base_url` names the Web API's root, which slack_sdk's
`WebClient` takes and SlackResource does not pass: a proxy, or the loopback server that
stands in for Slack in the tests.
"""

from __future__ import annotations

import os

import dagster as dg
from dagster_slack import SlackResource
from pydantic import Field
from slack_sdk import WebClient

TOKEN_ENV = "SLACK_BOT_TOKEN"  # a bot token (xoxb-...) with chat:write, from a Secret in the chart


class CatchupSlack(SlackResource):
    """SlackResource with an optional token and a configurable Web API root."""

    token: str = Field(default="", description=f"a bot token; empty: notifications off (set ${TOKEN_ENV})")
    base_url: str = Field(default=WebClient.BASE_URL, description="the Slack Web API's root URL")

    def get_client(self) -> WebClient:
        return WebClient(self.token, base_url=self.base_url)


def slack_from_env() -> CatchupSlack:
    """The token as a dg.EnvVar (resolved where the sensor runs, kept out of the config snapshot) when
    the code location has it; none otherwise, as an unset EnvVar would fail every tick instead of skipping."""
    return CatchupSlack(token=dg.EnvVar(TOKEN_ENV)) if os.environ.get(TOKEN_ENV) else CatchupSlack()
