"""The Slack Web API client the notification sensor posts with: dagster-slack's resource, its token optional.

`dagster_slack.SlackResource` requires a token and always talks to slack.com. Here the token
is empty when none is configured (notifications off: `notify_sensor` skips, saying so,
instead of failing every tick), and `base_url` names the Web API's root, which slack_sdk's
`WebClient` takes and SlackResource does not pass: a proxy, or the loopback server that
stands in for Slack in the tests.
"""

from __future__ import annotations

import os
import re

import dagster as dg
from dagster_slack import SlackResource
from pydantic import Field
from slack_sdk import WebClient

from catchup_assets.core.errors import ConfigError

TOKEN_ENV = "SLACK_BOT_TOKEN"  # a bot token (xoxb-...) with chat:write, from a Secret in the chart
# Slack's rules: a channel name is lowercase letters, digits, hyphens and underscores, at most 80
# (conversations.create), given with or without its "#"; or a conversation id (C..., G..., D...).
# Anything else would be posted to as given: a newline in it forges a line of the sensor's log.
CHANNEL = re.compile(r"#?[a-z0-9_\-]{1,80}|[CGD][A-Z0-9]{8,15}")
# The same rule as JSON Schema's (anchored, empty allowed): the chart's slackChannel, refused by helm too.
CHANNEL_PATTERN = r"^$|^#?[a-z0-9_\-]{1,80}$|^[CGD][A-Z0-9]{8,15}$"
CHANNEL_RULE = "a name of lowercase letters, digits, - and _ (at most 80, with or without its #), or a channel id"


def check_slack_channel(channel: str) -> None:
    """Refuse a channel Slack would not have, naming the field: at load, not at the first notification."""
    if channel and not CHANNEL.fullmatch(channel):
        shown = repr(channel[:40]) + ("..." if len(channel) > 40 else "")
        raise ConfigError(
            f"slack_channel: {shown} ({len(channel)} characters) is not a Slack channel: {CHANNEL_RULE}; "
            "empty: notifications off"
        )


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
