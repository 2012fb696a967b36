"""Issue 45 item 4 (failure 4.2: a presigned URL's X-Amz-Signature was kept in mission.json and the event log):
every credential a URL carries is redacted wherever the text quotes it, and named for the launch form's refusal."""

from __future__ import annotations

import pytest

from catchup_assets.core.redact import redact_url, url_credentials

CASES = [
    # (text, redacted)
    ("s3://key:secret@bucket/p/range_profile.parquet", "s3://***@bucket/p/range_profile.parquet"),
    ("https://u:p@ss@h/x.parquet", "https://***@h/x.parquet"),
    (
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIA%2F1&X-Amz-Signature=abc123",
        "https://b.s3.amazonaws.com/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=***&X-Amz-Signature=***",
    ),
    ("https://h/k?x-amz-security-token=TOK&v=1", "https://h/k?x-amz-security-token=***&v=1"),
    (
        "https://storage.googleapis.com/b/o?X-Goog-Credential=sa%40p&X-Goog-Signature=9f8e",
        "https://storage.googleapis.com/b/o?X-Goog-Credential=***&X-Goog-Signature=***",
    ),
    (
        "https://a.blob.core.windows.net/c/p?sv=2022&sp=r&sig=Zm9v%3D",
        "https://a.blob.core.windows.net/c/p?sv=2022&sp=r&sig=***",
    ),
    ("https://h/p?token=abc#frag", "https://h/p?token=***#frag"),
    (
        "https://h/p?AWSAccessKeyId=AKIA&Signature=xyz&Expires=1",
        "https://h/p?AWSAccessKeyId=***&Signature=***&Expires=1",
    ),
    # inside a sentence, as a driver's error quotes it
    (
        "previous profile https://h/p?sig=S3CR3T is unreachable (ClientResponseError: 403, url='https://h/p?sig=S3CR3T')",
        "previous profile https://h/p?sig=*** is unreachable (ClientResponseError: 403, url='https://h/p?sig=***')",
    ),
    # nothing to redact
    ("https://h/p?page=2&signed=yes", "https://h/p?page=2&signed=yes"),
    ("/data/m1/range_profile.parquet", "/data/m1/range_profile.parquet"),
]


@pytest.mark.parametrize(("text", "redacted"), CASES)
def test_issue45_redact_url_removes_userinfo_and_every_credential_query_value(text, redacted):
    assert redact_url(text) == redacted


@pytest.mark.parametrize(
    ("url", "found"),
    [
        ("https://ops:pw@h/p", ["userinfo"]),
        ("https://h/p?X-Amz-Credential=a&X-Amz-Signature=b&X-Amz-Date=1", ["X-Amz-Credential", "X-Amz-Signature"]),
        ("https://h/p?X-Goog-Signature=b", ["X-Goog-Signature"]),
        ("https://h/p?sv=1&sig=b", ["sig"]),
        ("https://h/p?access_token=b", ["access_token"]),
        ("s3://k:s@bucket/p?token=t", ["userinfo", "token"]),
        ("https://h/p?page=2", []),
        ("latest", []),
        ("/local/range_profile.parquet", []),
        ("https://[broken/p", []),
    ],
)
def test_issue45_url_credentials_names_what_a_url_carries_inline(url, found):
    assert url_credentials(url) == found
