"""The one judge of output bytes (gpuharness.runtimes.outputs): its reasons name the file and what is wrong, the
declared type is the server's and the name's together, every read and decode has a cap, and outputs are held
against the workflow's expected_outputs. The hostile classes themselves are attacked in
tests/adversarial/test_output_decoding.py."""

from __future__ import annotations

import io

import httpx
import pytest
from PIL import Image, ImageFile

from gpuharness.remote.http import PhaseHttp
from gpuharness.runtimes import check_expected, run_test_generation
from gpuharness.runtimes.outputs import (
    BOMB,
    EMPTY,
    TOO_LARGE,
    UNDECODABLE,
    UNVERIFIABLE,
    WRONG_TYPE,
    Served,
    judge,
    media_type,
    shortfall,
)
from gpuharness.sim.output_faults import SIGNATURE_THEN_ZEROS, bomb_png


def image(fmt: str, size: tuple[int, int] = (8, 8)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, (10, 200, 30)).save(buffer, fmt)
    return buffer.getvalue()


def test_a_real_png_counts_and_is_described():
    verdict = judge(Served("out.png", image("PNG", (12, 7)), "image/png"))
    assert verdict.ok and (verdict.kind, verdict.description) == ("image/png", "PNG 12x7 RGB")


def test_a_signature_then_zeros_is_refused_in_pillows_words():
    verdict = judge(Served("out.png", SIGNATURE_THEN_ZEROS, "image/png"))
    assert verdict.refusal is not None and verdict.refusal.cause == UNDECODABLE
    assert verdict.refusal.reason.startswith("out.png: not a decodable PNG: broken PNG file (chunk ")
    assert verdict.refusal.remedy and "log" in verdict.refusal.remedy


def test_another_images_bytes_under_a_png_name_are_named():
    verdict = judge(Served("out.png", image("JPEG"), "image/png"))
    assert verdict.refusal is not None
    assert verdict.refusal.reason == "out.png: not a decodable PNG: the bytes are a JPEG"


def test_a_bomb_is_refused_for_its_size_before_it_is_decoded():
    verdict = judge(Served("out.png", bomb_png(), "image/png"))
    assert verdict.refusal is not None and verdict.refusal.cause == BOMB
    assert "10000x10000 pixels exceeds the cap of 89,478,485 pixels" in verdict.refusal.reason


def test_a_name_and_a_content_type_that_disagree_are_refused():
    verdict = judge(Served("out.png", image("PNG"), "image/jpeg"))
    assert verdict.refusal is not None and verdict.refusal.cause == WRONG_TYPE
    assert verdict.refusal.reason == "out.png: its name says image/png, the server's Content-Type says image/jpeg"


@pytest.mark.parametrize(("content_type", "name", "kind"), [
    ("image/png; charset=binary", "x", "image/png"), ("IMAGE/JPG", "x", "image/jpeg"),
    ("application/octet-stream", "x.webp", "image/webp"), (None, "a.b.GIF", "image/gif"), (None, "x", None),
])
def test_the_declared_type_is_the_content_type_else_the_extension(content_type, name, kind):
    assert judge(Served(name, b"\x00", content_type)).kind == kind


def test_expected_types_are_read_in_any_spelling():
    assert [media_type(t) for t in ("png", ".jpg", "image/x-png", "text/plain; charset=utf-8", "")] == [
        "image/png", "image/jpeg", "image/png", "text/plain", None]


def test_an_output_over_the_byte_cap_is_refused():
    verdict = judge(Served("out.txt", b"x" * 11, "text/plain"), max_bytes=10)
    assert verdict.refusal is not None and verdict.refusal.cause == TOO_LARGE
    assert verdict.refusal.reason == "out.txt: more than 10 bytes, the cap on an output"


def test_a_download_reads_no_more_than_its_limit_and_one_byte():
    sent: list[int] = []

    def stream():
        for _ in range(1000):
            sent.append(1)
            yield b"y" * 1024

    transport = httpx.MockTransport(lambda request: httpx.Response(200, content=stream(),
                                                                   headers={"Content-Type": "text/plain"}))
    with PhaseHttp("http://runtime.invalid", transport=transport) as http:
        got = http.download("/view", limit=10_000)
    assert (got.status, got.content_type, len(got.data)) == (200, "text/plain", 10_001)
    assert len(sent) < 20, "the rest of the body was read"


def test_pillow_set_to_load_cut_images_verifies_none(monkeypatch):
    monkeypatch.setattr(ImageFile, "LOAD_TRUNCATED_IMAGES", True)
    verdict = judge(Served("out.png", image("PNG"), "image/png"))
    assert verdict.refusal is not None and verdict.refusal.cause == UNVERIFIABLE
    assert "LOAD_TRUNCATED_IMAGES" in verdict.refusal.reason


def test_text_and_json_reasons_name_the_place():
    assert judge(Served("a.txt", b"ok \xff", "text/plain")).refusal.reason == (
        "a.txt: not UTF-8 text: byte 3 (0xff): invalid start byte")
    assert judge(Served("a.json", b'{"x": NaN}', None)).refusal.reason == (
        "a.json: not valid JSON: NaN is not a finite number (JSON has no NaN or Infinity) (at 1:7)")
    blank = judge(Served("a.txt", b" \n", None)).refusal
    assert blank is not None and blank.cause == EMPTY


def test_a_broken_output_fails_the_generation_even_when_nothing_expects_it():
    verdicts = [judge(Served("a.png", image("PNG"), None)), judge(Served("b.png", SIGNATURE_THEN_ZEROS, None))]
    refusal = shortfall(verdicts, [{"type": "image/png"}])
    assert refusal is not None and refusal.reason.startswith("b.png: not a decodable PNG")


def test_an_unverifiable_output_beside_one_that_counts_is_listed_not_counted():
    outcome = check_expected([Served("a.png", image("PNG"), None), Served("b.flac", b"fLaC....", None)],
                             [{"type": "image/png", "min_bytes": 10}], started=0.0, clock=lambda: 0.0)
    assert outcome.ok and [a.name for a in outcome.outputs] == ["a.png"]
    assert "not counted: b.flac: audio/flac cannot be verified" in outcome.message


def test_outputs_of_which_none_can_be_verified_fail():
    outcome = check_expected([Served("b.flac", b"fLaC....", None)], [], started=0.0, clock=lambda: 0.0)
    assert (outcome.ok, outcome.cause) == (False, UNVERIFIABLE)


def test_min_bytes_is_held_against_the_outputs_that_count():
    outcome = check_expected([Served("a.png", image("PNG"), None)], [{"type": "png", "min_bytes": 100_000}],
                             started=0.0, clock=lambda: 0.0)
    assert (outcome.ok, outcome.cause) == (False, EMPTY)
    assert "outputs of type image/png are smaller than 100000 bytes" in outcome.message


def test_a_serverless_output_carrying_nan_does_not_count():
    def endpoint(request: httpx.Request) -> httpx.Response:
        body = b'{"id": "sync-1", "status": "COMPLETED", "output": {"image": "https://x/y.png", "score": NaN}}'
        return httpx.Response(200, content=body, headers={"Content-Type": "application/json"})

    workflow = {"id": "sls", "runtime": "serverless", "test_generation": {"inputs": {"prompt": "a"}, "timeout_s": 5}}
    with httpx.Client(transport=httpx.MockTransport(endpoint), base_url="http://runtime.invalid/v2/ep1/") as client:
        outcome = run_test_generation("serverless", client, workflow, sleep=lambda _s: None)
    assert (outcome.ok, outcome.cause) == (False, UNDECODABLE)
    assert "job sync-1 COMPLETED: output.json: not valid JSON: NaN is not a finite number" in outcome.message
