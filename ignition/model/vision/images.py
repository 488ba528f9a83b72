"""Image references -> decoded Pillow images, or a one-line error naming the part.

Only ``data:`` URLs and files inside an allowed folder; never the network. Limits are checked
before pixels are decoded.
"""

from __future__ import annotations

import base64
import binascii
import io
import warnings
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlparse

from PIL import Image, UnidentifiedImageError

MAX_IMAGE_BYTES = 20 * 1024 * 1024
MAX_DECODED_PIXELS = 64 * 1024 * 1024


class ImageInputError(ValueError):
    """A bad image part; the message names the part (for a 400)."""

    def __init__(self, part: str, detail: str) -> None:
        super().__init__(f"{part}: {detail}")
        self.part = part
        self.detail = detail


@dataclass(frozen=True)
class ImagePolicy:
    """Where images may come from and how big they may be."""

    allowed_folder: Path | None = None  # local files only inside this folder
    max_bytes: int = MAX_IMAGE_BYTES
    max_pixels: int = MAX_DECODED_PIXELS


def load_image(url: str, part: str, policy: ImagePolicy = ImagePolicy()) -> Image.Image:
    """The decoded image ``url`` refers to, fully loaded, or ImageInputError naming ``part``."""
    if not isinstance(url, str) or not url:
        raise ImageInputError(part, "image_url.url must be a non-empty string")
    if url.startswith("data:"):
        data = _data_url_bytes(url, part)
    elif url.startswith(("http://", "https://")):
        raise ImageInputError(
            part, "fetching remote image URLs is disabled; send a base64 data URL"
        )
    else:
        data = _local_file_bytes(url, part, policy)
    if len(data) > policy.max_bytes:
        raise ImageInputError(part, f"image is {len(data)} bytes, above {policy.max_bytes}")
    return _decode(data, part, policy)


def _data_url_bytes(url: str, part: str) -> bytes:
    header, sep, payload = url.partition(",")
    if not sep or not header.endswith(";base64"):
        raise ImageInputError(part, "data URL must be data:image/<type>;base64,<data>")
    media = header[len("data:") : -len(";base64")]
    if not media.startswith("image/"):
        raise ImageInputError(part, f"data URL media type {media!r} is not an image")
    try:
        return base64.b64decode(payload, validate=True)
    except (binascii.Error, ValueError) as exc:
        raise ImageInputError(part, f"data URL is not valid base64 ({exc})") from exc


def _local_file_bytes(url: str, part: str, policy: ImagePolicy) -> bytes:
    if policy.allowed_folder is None:
        raise ImageInputError(
            part, "local image paths are off (start the server with --allowed-local-media-path DIR)"
        )
    parsed = urlparse(url)
    if parsed.scheme not in ("", "file"):
        raise ImageInputError(part, f"image URL scheme {parsed.scheme!r} is not supported")
    path = Path(unquote(parsed.path) if parsed.scheme == "file" else url)
    folder = policy.allowed_folder.resolve()
    resolved = path.resolve() if path.is_absolute() else (folder / path).resolve()
    if not resolved.is_relative_to(folder):
        raise ImageInputError(part, f"image path {url!r} is outside the allowed folder")
    if not resolved.is_file():
        raise ImageInputError(part, f"image file {url!r} does not exist")
    if resolved.stat().st_size > policy.max_bytes:
        raise ImageInputError(
            part, f"image is {resolved.stat().st_size} bytes, above {policy.max_bytes}"
        )
    return resolved.read_bytes()


def _decode(data: bytes, part: str, policy: ImagePolicy) -> Image.Image:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            image = Image.open(io.BytesIO(data))
            width, height = image.size
            if width <= 0 or height <= 0:
                raise ImageInputError(part, f"image is {width}x{height} pixels: zero-sized")
            if width * height > policy.max_pixels:
                raise ImageInputError(
                    part, f"image is {width}x{height} pixels, above {policy.max_pixels}"
                )
            image.load()
    except ImageInputError:
        raise
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ImageInputError(part, f"image could not be decoded ({exc})") from exc
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ImageInputError(part, f"image is too large to decode ({exc})") from exc
    return image
