"""Issue 13, image inputs at the HTTP door (server/images.py), against a scripted engine.

Chat content parts of type ``image_url`` carry base64 data URLs, or local files only inside
the folder the server was started with; nothing is fetched; each bad image is a 400 naming
its part; a text-only model given an image is a 400. The scripted engine tokenizes one id
per character, so the placeholder "<#>" holds the image token 36 between its own start and end.
"""

from __future__ import annotations

import base64
import struct
import zlib
from dataclasses import replace

from ignition.model.vision.images import ImagePolicy
from ignition.server.images import VisionServing
from tests.server.scripted import ScriptedEngine
from tests.server.test_bad_input import assert_openai_error, post
from tests.server.vision_checkpoint import PROCESSING, data_url, noise_image

VISION = VisionServing(
    image_token_id=ord("#") % 50 + 1, placeholder="<#>", merge_size=2, processing=PROCESSING
)
SMALL, WIDE = noise_image(16, 12, seed=1), noise_image(20, 28, seed=2)  # 4 and 8 features


def vision_engine(vision: VisionServing = VISION) -> ScriptedEngine:
    engine = ScriptedEngine()
    engine.vision = vision
    return engine


def image(url: str) -> dict:
    return {"type": "image_url", "image_url": {"url": url}}


def chat(*parts: dict) -> dict:
    return {"messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}, *parts]}]}


def test_each_image_part_becomes_one_token_per_feature_and_rides_with_the_request():
    engine = vision_engine()
    r = post(
        "/v1/chat/completions", chat(image(data_url(SMALL)), image(data_url(WIDE))), engine=engine
    )
    assert r.status_code == 200, r.text
    request = engine.requests[0]
    images = request.images
    assert images is not None and [s.length for s in images.spans] == [4, 8]
    assert sum(1 for t in request.prompt_ids if t == VISION.image_token_id) == 12
    assert images.rope.shape == (3, len(request.prompt_ids))
    assert r.json()["usage"]["prompt_tokens"] == len(request.prompt_ids)


def test_an_undecodable_image_is_a_400_naming_its_part():
    bad = "data:image/png;base64,aGVsbG8="
    r = post(
        "/v1/chat/completions", chat(image(data_url(SMALL)), image(bad)), engine=vision_engine()
    )
    error = assert_openai_error(r, 400, "messages[0].content[2].image_url")
    assert "could not be decoded" in error["message"]


def test_an_image_above_the_byte_limit_is_a_400_naming_its_part():
    vision = replace(VISION, policy=ImagePolicy(max_bytes=64))
    r = post("/v1/chat/completions", chat(image(data_url(WIDE))), engine=vision_engine(vision))
    error = assert_openai_error(r, 400, "messages[0].content[1].image_url")
    assert "above 64" in error["message"]


def zero_width_png() -> str:
    """A PNG whose header says 0 x 5 pixels."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = zlib.crc32(kind + data) & 0xFFFFFFFF
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", 0, 5, 8, 2, 0, 0, 0)
    data = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b""))
    return "data:image/png;base64," + base64.b64encode(data + chunk(b"IEND", b"")).decode()


def test_a_zero_sized_image_is_a_400_naming_its_part():
    r = post("/v1/chat/completions", chat(image(zero_width_png())), engine=vision_engine())
    error = assert_openai_error(r, 400, "messages[0].content[1].image_url")
    assert "could not be decoded" in error["message"]


def test_an_image_the_processor_cannot_resize_is_a_400_naming_its_part():
    # 1 pixel tall: far beyond the processor's aspect-ratio bound
    r = post(
        "/v1/chat/completions",
        chat(image(data_url(noise_image(400, 1, 0)))),
        engine=vision_engine(),
    )
    error = assert_openai_error(r, 400, "messages[0].content[1].image_url")
    assert "aspect ratio" in error["message"]


def test_more_images_than_allowed_is_a_400_naming_the_first_one_too_many():
    vision = replace(VISION, max_images=2)
    parts = [image(data_url(SMALL))] * 3
    r = post("/v1/chat/completions", chat(*parts), engine=vision_engine(vision))
    error = assert_openai_error(r, 400, "messages[0].content[3].image_url")
    assert "at most 2" in error["message"]


def test_a_text_only_model_given_an_image_is_a_400():
    engine = ScriptedEngine()  # no ``vision``
    r = post("/v1/chat/completions", chat(image(data_url(SMALL))), engine=engine)
    error = assert_openai_error(r, 400, "messages[0].content[1].image_url")
    assert "no vision encoder" in error["message"]
    assert engine.requests == []


def test_a_remote_url_is_never_fetched():
    r = post("/v1/chat/completions", chat(image("http://10.0.0.1/a.png")), engine=vision_engine())
    error = assert_openai_error(r, 400, "messages[0].content[1].image_url")
    assert "fetching remote image URLs is disabled" in error["message"]


def test_local_paths_need_the_allowed_folder_and_stay_inside_it(tmp_path):
    inside = tmp_path / "media"
    inside.mkdir()
    SMALL.save(inside / "a.png")
    SMALL.save(tmp_path / "outside.png")
    r = post("/v1/chat/completions", chat(image(str(inside / "a.png"))), engine=vision_engine())
    assert "--allowed-local-media-path" in assert_openai_error(r, 400)["message"]
    allowed = vision_engine(replace(VISION, policy=ImagePolicy(allowed_folder=inside)))
    r = post("/v1/chat/completions", chat(image(f"file://{inside / 'a.png'}")), engine=allowed)
    assert r.status_code == 200, r.text
    r = post("/v1/chat/completions", chat(image(str(tmp_path / "outside.png"))), engine=allowed)
    assert "outside the allowed folder" in assert_openai_error(r, 400)["message"]


def test_an_image_pad_typed_as_text_is_a_400_not_a_misplaced_image():
    body = chat(image(data_url(SMALL)))
    body["messages"][0]["content"][0]["text"] = "a # here"
    r = post("/v1/chat/completions", body, engine=vision_engine())
    error = assert_openai_error(r, 400, "messages")
    assert "placeholder" in error["message"]


def test_tokenize_counts_one_token_per_image_feature_as_served():
    engine = vision_engine()
    body = chat(image(data_url(SMALL)), image(data_url(WIDE)))
    served = post("/v1/chat/completions", body, engine=engine)
    r = post("/tokenize", body, engine=vision_engine())
    assert r.status_code == 200, r.text
    assert r.json()["tokens"] == list(engine.requests[0].prompt_ids)
    assert r.json()["count"] == served.json()["usage"]["prompt_tokens"]
