"""Issue 13 deliverable 2: images come from base64 data URLs, or local files only inside an
allowed folder; no network fetches; bad images are an error naming the part."""

from __future__ import annotations

import base64
import io

import pytest
from PIL import Image

from ignition.model.vision.images import ImageInputError, ImagePolicy, load_image

PART = "messages[0].content[1]"


def png_bytes(width: int = 6, height: int = 4) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (width, height), (10, 20, 30)).save(out, format="PNG")
    return out.getvalue()


def data_url(data: bytes, media: str = "image/png") -> str:
    return f"data:{media};base64," + base64.b64encode(data).decode()


def test_base64_data_url_decodes_to_the_image():
    image = load_image(data_url(png_bytes(6, 4)), PART)
    assert image.size == (6, 4) and image.getpixel((0, 0)) == (10, 20, 30)


@pytest.mark.parametrize(
    ("url", "needle"),
    [
        (data_url(b"not an image"), "could not be decoded"),
        ("data:image/png;base64,@@@", "not valid base64"),
        (data_url(png_bytes(), "text/plain"), "not an image"),
        ("https://example.com/cat.png", "fetching remote image URLs is disabled"),
        ("/tmp/cat.png", "local image paths are off"),
        ("", "non-empty"),
    ],
)
def test_bad_image_is_an_error_naming_the_part(url, needle):
    with pytest.raises(ImageInputError, match=needle) as info:
        load_image(url, PART)
    assert str(info.value).startswith(PART + ": ")


def test_too_large_images_are_refused_before_decoding():
    with pytest.raises(ImageInputError, match="bytes, above 10"):
        load_image(data_url(png_bytes()), PART, ImagePolicy(max_bytes=10))
    with pytest.raises(ImageInputError, match="6x4 pixels, above 20"):
        load_image(data_url(png_bytes()), PART, ImagePolicy(max_pixels=20))


def test_local_files_load_only_inside_the_allowed_folder(tmp_path):
    allowed = tmp_path / "images"
    allowed.mkdir()
    (allowed / "a.png").write_bytes(png_bytes(3, 5))
    (tmp_path / "secret.png").write_bytes(png_bytes())
    policy = ImagePolicy(allowed_folder=allowed)
    assert load_image(str(allowed / "a.png"), PART, policy).size == (3, 5)
    assert load_image(f"file://{allowed / 'a.png'}", PART, policy).size == (3, 5)
    with pytest.raises(ImageInputError, match="outside the allowed folder"):
        load_image(str(allowed / ".." / "secret.png"), PART, policy)
    with pytest.raises(ImageInputError, match="does not exist"):
        load_image(str(allowed / "b.png"), PART, policy)
