"""The storage root on a real S3 API (moto's server, see conftest.moto_s3): what other
processes see of each other's writes, and the claim's exclusive create."""

import logging
import threading

import boto3
import botocore.exceptions
import pytest

from catchup_assets.core.values.attempt_record import AttemptRecord
from catchup_assets.store.records import RecordStore
from catchup_assets.store.root import Store

KEY = "0000016001-0000032000"


def test_a_listing_never_hides_what_another_process_wrote_since(s3_bucket):
    """Another dispatcher's done mark, written after this process listed the range's
    attempts, must read as there: s3fs's listing cache once answered exists() from the
    earlier listing, and a second finisher would have overwritten the first's record."""
    store = Store(f"s3://{s3_bucket}/root")
    records = RecordStore(store, "m1")
    records.write(AttemptRecord("m1", KEY, 1, "ok", seconds=1.0, fresh_start=True))
    assert records.load()[1] == set()  # listed: the record and no done mark
    # The other process: a separate client, not this process's s3fs and its caches.
    s3 = boto3.client("s3")
    s3.put_object(Bucket=s3_bucket, Key=f"root/m1/attempts/{KEY}/_a001.done", Body=b"")
    assert records.is_done(KEY, 1)
    s3.put_object(Bucket=s3_bucket, Key="root/m2/plan.parquet", Body=b"x")
    assert store.exists("m2/plan.parquet")


def test_claims_on_s3_are_an_atomic_conditional_put(s3_bucket, caplog):
    """s3fs opens "xb" as a PUT with If-None-Match: *, which the server refuses (412) when the
    key exists; no check-then-write fallback (its warning) is taken. Eight racing creators
    of one key: exactly one wins and the object holds the winner's bytes."""
    store = Store(f"s3://{s3_bucket}/root")
    go = threading.Barrier(8)
    won: dict[int, bool] = {}

    def create(i):
        go.wait()
        won[i] = store.create_exclusive("m/attempts/k/_claim-a001", f"holder {i}".encode())

    with caplog.at_level(logging.WARNING, logger="catchup_assets.store.root"):
        threads = [threading.Thread(target=create, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    (winner,) = [i for i, ok in won.items() if ok]
    assert len(won) == 8 and store.read_bytes("m/attempts/k/_claim-a001") == f"holder {winner}".encode()
    assert store.create_exclusive("m/attempts/k/_claim-a001", b"again") is False
    assert "no exclusive create" not in caplog.text
    # The server itself enforces the condition (what makes it atomic across processes).
    with pytest.raises(botocore.exceptions.ClientError, match="PreconditionFailed"):
        boto3.client("s3").put_object(Bucket=s3_bucket, Key="root/m/attempts/k/_claim-a001", Body=b"x", IfNoneMatch="*")
