"""The authorization header as each official SDK sends it, its verification, the clock rule and the replay window."""

from __future__ import annotations

from datetime import UTC, datetime

import grpc
import pytest
from mq_common.auth.clock import ClientClocks, parse_date_time_ms
from mq_common.auth.interceptor import SigningInterceptor
from mq_common.auth.settings import Credentials
from mq_common.auth.signature import (
    AuthFailure,
    SignatureVerifier,
    format_date_time,
    hmac_sha1_hex,
    parse_authorization,
    sign,
)

SECRET = "s3cr3t-key"
HOUR_MS = 3_600_000
NOW = datetime(2026, 11, 25, 4, 30, 0, tzinfo=UTC)
NOW_MS = int(NOW.timestamp() * 1000)


def header(access_key: str, date_time: str, upper: bool = False, credential_suffix: str = "") -> str:
    signature = hmac_sha1_hex(SECRET, date_time)
    signature = signature.upper() if upper else signature
    return (
        f"MQv2-HMAC-SHA1 Credential={access_key}{credential_suffix}, SignedHeaders=x-mq-date-time, "
        f"Signature={signature}"
    )


def local(offset_ms: int) -> str:
    """The date-time an SDK in a zone ``offset_ms`` east of UTC sends at NOW (local time labelled Z)."""
    return datetime.fromtimestamp((NOW_MS + offset_ms) / 1000, UTC).strftime("%Y%m%dT%H%M%SZ")


def test_hmac_matches_a_known_vector() -> None:
    # RFC 2202 test case 2 (HMAC-SHA1, key "Jefe").
    assert hmac_sha1_hex("Jefe", "what do ya want for nothing?") == "effcdf6ae5eb2fa2d27416d5f184df9c259a7c79"


@pytest.mark.parametrize(
    ("sdk", "upper", "suffix"),
    [("python", False, ""), ("java", True, ""), ("nodejs", True, ""), ("go", False, "//Rocketmq")],
)
def test_each_sdk_header_shape_parses_and_verifies(sdk: str, upper: bool, suffix: str) -> None:
    date_time = local(0)
    parsed = parse_authorization(header("alice", date_time, upper, suffix))
    assert parsed is not None
    assert parsed.access_key == "alice"
    assert parsed.signed_headers == ("x-mq-date-time",)
    assert parsed.signature == hmac_sha1_hex(SECRET, date_time)
    assert SignatureVerifier(60_000, 60_000).verify(parsed, date_time, SECRET, sdk, NOW_MS) is None


def test_python_sdk_without_keys_is_anonymous() -> None:
    parsed = parse_authorization(f"MQv2-HMAC-SHA1 Credential=, SignedHeaders=x-mq-date-time, Signature={'0' * 40}")
    assert parsed is not None
    assert parsed.anonymous


@pytest.mark.parametrize("value", ["", "MQv2-HMAC-SHA1", "Basic abc", "MQv2-HMAC-SHA1 Credential=a"])
def test_non_mqv2_values_are_not_headers(value: str) -> None:
    assert parse_authorization(value) is None


def test_wrong_secret_is_a_bad_signature_and_is_not_cached() -> None:
    verifier = SignatureVerifier(60_000, 60_000)
    parsed = parse_authorization(header("alice", local(0)))
    assert parsed is not None
    assert verifier.verify(parsed, local(0), "other", "c", NOW_MS) is AuthFailure.BAD_SIGNATURE
    assert verifier.verify(parsed, local(0), SECRET, "c", NOW_MS) is None
    # A verified triple does not make another secret pass (a rotated secret applies at once).
    assert verifier.verify(parsed, local(0), "other", "c", NOW_MS) is AuthFailure.BAD_SIGNATURE


@pytest.mark.parametrize(
    "text",
    ["MQv2-HMAC-SHA256 Credential=alice, SignedHeaders=x-mq-date-time, Signature=" + "0" * 40, "no-date-header"],
)
def test_malformed_headers_are_refused(text: str) -> None:
    parsed = parse_authorization(text) or parse_authorization(
        f"MQv2-HMAC-SHA1 Credential=alice, SignedHeaders=x-mq-other, Signature={hmac_sha1_hex(SECRET, local(0))}"
    )
    assert parsed is not None
    assert SignatureVerifier(60_000, 60_000).verify(parsed, local(0), SECRET, "c", NOW_MS) is AuthFailure.MALFORMED


def test_a_signature_of_a_bad_date_time_is_malformed() -> None:
    parsed = parse_authorization(header("alice", "2026-11-25 04:30"))
    assert parsed is not None
    verdict = SignatureVerifier(60_000, 60_000).verify(parsed, "2026-11-25 04:30", SECRET, "c", NOW_MS)
    assert verdict is AuthFailure.MALFORMED


def verdict(
    date_time: str, client: str = "c", verifier: SignatureVerifier | None = None, now_ms: int = NOW_MS
) -> AuthFailure | None:
    """What ``verifier`` (default: skew and replay window 1 minute) says of alice's header for ``date_time``."""
    parsed = parse_authorization(header("alice", date_time))
    assert parsed is not None
    return (verifier or SignatureVerifier(60_000, 60_000)).verify(parsed, date_time, SECRET, client, now_ms)


@pytest.mark.parametrize(
    "zone_ms", [0, -5 * HOUR_MS, 8 * HOUR_MS, int(5.5 * HOUR_MS), int(5.75 * HOUR_MS), 14 * HOUR_MS]
)
def test_clients_in_any_zone_are_accepted(zone_ms: int) -> None:
    assert verdict(local(zone_ms + 20_000)) is None  # its clock also runs 20 s fast


def test_a_day_old_date_time_is_stale_even_from_a_new_client() -> None:
    assert verdict(local(-24 * HOUR_MS), "new") is AuthFailure.STALE_DATE_TIME


def test_an_hour_old_date_time_from_a_known_client_is_stale() -> None:
    verifier = SignatureVerifier(60_000, 60_000)
    assert verdict(local(2 * HOUR_MS), "client-1", verifier) is None  # a client in UTC+2
    # the same client's header of an hour ago
    assert verdict(local(HOUR_MS), "client-1", verifier) is AuthFailure.STALE_DATE_TIME
    # an hour ahead (its zone sprang forward) is accepted
    assert verdict(local(3 * HOUR_MS), "client-1", verifier) is None


def test_a_date_time_between_zones_is_skewed() -> None:
    assert verdict(local(7 * 60_000)) is AuthFailure.STALE_DATE_TIME  # 7 minutes off any quarter hour


def test_a_triple_is_refused_after_the_replay_window() -> None:
    verifier = SignatureVerifier(120_000, 30_000)
    assert verdict(local(0), "c", verifier) is None
    assert verdict(local(0), "c", verifier, NOW_MS + 29_000) is None
    assert verdict(local(0), "other", verifier, NOW_MS + 31_000) is AuthFailure.REPLAYED


def test_a_skew_of_half_a_zone_step_or_more_is_clamped_below_it() -> None:
    clocks = ClientClocks(15 * 60_000)
    # 7.5 minutes off every zone: accepted by any skew of 7.5 min or more, refused by the clamped one
    assert not clocks.accept(("alice", "c"), NOW_MS + 450_000, NOW_MS)
    assert clocks.accept(("alice", "c"), NOW_MS + 449_000, NOW_MS)


@pytest.mark.parametrize("text", ["", "20261125T043000", "20261325T043000Z", "20261125 043000Z", "x" * 16])
def test_malformed_date_times_do_not_parse(text: str) -> None:
    assert parse_date_time_ms(text) is None
    assert parse_date_time_ms("20261125T043000Z") == NOW_MS


def test_sign_produces_a_header_the_verifier_accepts() -> None:
    pairs = dict(sign("bob", SECRET, NOW))
    assert pairs["x-mq-date-time"] == format_date_time(NOW) == "20261125T043000Z"
    parsed = parse_authorization(pairs["authorization"])
    assert parsed is not None
    assert parsed.access_key == "bob"
    assert SignatureVerifier(60_000, 60_000).verify(parsed, pairs["x-mq-date-time"], SECRET, "c", NOW_MS) is None


def test_interceptor_signs_once_per_second_and_replaces_caller_headers() -> None:
    clock = [NOW.timestamp() + 0.1]
    interceptor = SigningInterceptor(Credentials("bob", SECRET), now_s=lambda: clock[0])
    first = interceptor.headers()
    clock[0] += 0.5
    assert interceptor.headers() is first
    clock[0] += 1.0
    assert interceptor.headers() != first
    details = grpc.aio.ClientCallDetails(
        "/m", None, grpc.aio.Metadata(("authorization", "forged"), ("x-mq-client-id", "c")), None, None
    )
    signed = interceptor._signed(details)
    assert signed.metadata is not None
    values = list(signed.metadata)
    assert ("authorization", "forged") not in values
    assert ("x-mq-client-id", "c") in values
    assert str(dict(values)["authorization"]).startswith("MQv2-HMAC-SHA1 Credential=bob,")
    assert SECRET not in repr(Credentials("bob", SECRET))
