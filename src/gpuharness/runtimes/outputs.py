"""Whether an output of a runtime counts: its bytes decoded fully as the type it declares, or refused with a reason a
person can act on. The one judge of output bytes: every runtime's test generation (`runtimes.check_expected`) and
the run phase's completion answers (`operations.openai_job`) go through `judge`; `shortfall` holds the outputs
against the workflow's `expected_outputs`.

What counts, by the type an output declares:
- image/png: Pillow opens it as a PNG, `verify()` checks the CRC of every chunk up to IEND, `load()` decodes every
  frame on a fresh image; IEND's own CRC follows, and nothing after it;
- image/jpeg: Pillow decodes every pixel (a cut scan is refused), and the file ends with the EOI marker;
- image/webp: Pillow (libwebp) decodes every frame, and the RIFF header's size is the file's size;
- image/gif: Pillow decodes every frame, and its blocks walk to the trailer, the file's last byte;
- video/mp4: its boxes walk to the end (each inside its parent, the top level ending at the file's end), `ftyp`
  first, a `moov` with a `trak`, a non-empty `mdat`; the frames are not decoded (no decoder without new
  dependencies);
- application/json (and `+json`): UTF-8, then `core.json_text.loads` (no NaN, Infinity, repeated key or lone
  surrogate);
- text/*: UTF-8, and not blank;
- anything else (video/webm, audio/*): never; refused as unverifiable, so it cannot count.

The type declared is the server's Content-Type, else the one the name's extension gives; when both say one, they
agree. Every output is refused above MAX_BYTES, every image above MAX_PIXELS (Pillow's own MAX_IMAGE_PIXELS; its
DecompressionBombWarning is an error here) and above MAX_DECODED_PIXELS over all its frames. PNG carries CRCs and an
adler32, so a flipped bit anywhere is caught; JPEG, WebP and GIF carry no checksum over their coded pixels, so a flip
there decodes as other pixels: of those, a cut, a broken structure and a foreign tail are caught.
"""

from __future__ import annotations

import io
import struct
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, final

from PIL import GifImagePlugin, Image, ImageFile, JpegImagePlugin, PngImagePlugin, WebPImagePlugin

from gpuharness.core import json_text
from gpuharness.core.errors import GpuharnessError, UserError

#: the most bytes an output may have (a test generation's output is small; a run's is fetched by retrieve)
MAX_BYTES: Final = 256 << 20
#: the most pixels an image may have: Pillow's MAX_IMAGE_PIXELS as it ships (about 9,459 x 9,459)
MAX_PIXELS: Final = 89_478_485
#: the most pixels all the frames of an animated image may have together
MAX_DECODED_PIXELS: Final = 4 * MAX_PIXELS
#: the most boxes an MP4 may have (a fragmented one has two per fragment)
MAX_BOXES: Final = 100_000

EMPTY: Final = "empty_output"
UNDECODABLE: Final = "undecodable_output"
WRONG_TYPE: Final = "wrong_type"
TOO_LARGE: Final = "output_too_large"
BOMB: Final = "decompression_bomb"
UNVERIFIABLE: Final = "unverifiable_output"

VERIFIABLE: Final = ("image/png", "image/jpeg", "image/webp", "image/gif", "video/mp4", "application/json",
                     "text/plain")
_REMEDIES: Final[dict[str, str]] = {
    UNDECODABLE: "the runtime served a broken file: read its log (an interrupted save, a full disk, a failing node) "
                 "and run the test generation again",
    WRONG_TYPE: "make the workflow's expected_outputs name the type its output node writes",
    TOO_LARGE: "make the test generation small (a few hundred pixels, a short clip)",
    BOMB: "make the test generation small (a few hundred pixels); a server sending this is not to be trusted",
    UNVERIFIABLE: f"expect an output gpuharness can verify ({', '.join(VERIFIABLE)}) from the test generation",
}
#: the type each extension gives a file (a fixed table: mimetypes reads the machine's own files)
_EXTENSIONS: Final[dict[str, str]] = {
    ".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".webp": "image/webp", ".gif": "image/gif",
    ".mp4": "video/mp4", ".m4v": "video/mp4", ".json": "application/json", ".txt": "text/plain",
    ".webm": "video/webm", ".mkv": "video/x-matroska", ".flac": "audio/flac", ".mp3": "audio/mpeg",
    ".opus": "audio/opus", ".ogg": "audio/ogg", ".wav": "audio/wav", ".m4a": "audio/mp4",
}
_ALIASES: Final[dict[str, str]] = {
    "image/jpg": "image/jpeg", "image/pjpeg": "image/jpeg", "image/x-png": "image/png", "text/json": "application/json",
    "audio/x-flac": "audio/flac", "audio/mp3": "audio/mpeg", "audio/x-wav": "audio/wav", "audio/wave": "audio/wav",
}
#: Content-Types that say nothing about what a file is
_SAYS_NOTHING: Final = frozenset({"", "application/octet-stream", "binary/octet-stream", "application/binary",
                                  "application/unknown"})


@final
@dataclass(frozen=True, slots=True)
class Refusal:
    """Why an output (or a set of them) does not count: a cause, a reason naming the file, and what to do."""

    cause: str
    reason: str
    remedy: str | None = None


@final
@dataclass(frozen=True, slots=True)
class Served:
    """An output as a runtime served it: its name, its bytes and the Content-Type it was sent with."""

    name: str
    data: bytes
    content_type: str | None = None


@final
@dataclass(frozen=True, slots=True)
class Verdict:
    """What one output is worth: it counts (refusal None) as `kind`, described (`PNG 512x512 RGB`), with its parsed
    value for JSON and text; or it does not, and `refusal` says why. `kind` is the type it declared."""

    name: str
    kind: str | None
    size: int
    description: str = ""
    value: Any = None
    refusal: Refusal | None = None

    @property
    def ok(self) -> bool:
        return self.refusal is None


class _Refused(GpuharnessError):
    def __init__(self, cause: str, reason: str) -> None:
        super().__init__(reason)
        self.refusal = Refusal(cause, reason, _REMEDIES.get(cause))


def media_type(value: str | None) -> str | None:
    """A type as written (`image/png; charset=x`, `IMAGE/JPG`, `png`, `.png`) in its one spelling; None for none,
    or for one that says nothing of what a file is (application/octet-stream)."""
    if not value:
        return None
    kind = value.split(";", 1)[0].strip().lower()
    if "/" not in kind:
        return _EXTENSIONS.get(kind if kind.startswith(".") else f".{kind}")
    kind = _ALIASES.get(kind, kind)
    return None if kind in _SAYS_NOTHING else kind


def declared_type(name: str, content_type: str | None) -> str | None:
    """The type an output declares: its Content-Type, else the one its name's extension gives. _Refused when both
    say one and they disagree."""
    sent = media_type(content_type)
    dot = name.rfind(".")
    named = _EXTENSIONS.get(name[dot:].lower()) if dot > 0 else None
    if sent and named and sent != named:
        raise _Refused(WRONG_TYPE, f"{name}: its name says {named}, the server's Content-Type says {sent}")
    return sent or named


def judge(served: Served, *, max_bytes: int = MAX_BYTES) -> Verdict:
    """The verdict on one output's bytes (what counts, by type: the module's docstring)."""
    name, data = served.name, served.data
    kind: str | None = None
    try:
        kind = declared_type(name, served.content_type)
        if not data:
            raise _Refused(EMPTY, f"{name} is empty (0 bytes)")
        if len(data) > max_bytes:
            raise _Refused(TOO_LARGE, f"{name}: more than {max_bytes:,} bytes, the cap on an output")
        if kind is None:
            raise _Refused(UNVERIFIABLE, f"{name}: declares no type (no known extension, Content-Type "
                                         f"{served.content_type or 'missing'}), so it cannot be verified")
        reader = _reader(kind)
        if reader is None:
            raise _Refused(UNVERIFIABLE, f"{name}: {kind} cannot be verified here (no decoder for it without new "
                                         "dependencies), so it does not count")
        description, value = reader(name, kind, data)
    except _Refused as refused:
        return Verdict(name, kind, len(data), refusal=refused.refusal)
    return Verdict(name, kind, len(data), description, value)


def shortfall(verdicts: Sequence[Verdict], expected: Sequence[Mapping[str, Any]]) -> Refusal | None:
    """Why the outputs of a test generation do not meet its `expected_outputs` (type, min_bytes), or None. A broken
    output fails it whether expected or not; one of a type that cannot be verified fails it only when none counts
    or an expected type has no output that counts."""
    if not verdicts:
        return Refusal(EMPTY, "the test generation finished but produced no output")
    broken = next((v.refusal for v in verdicts if v.refusal is not None and v.refusal.cause != UNVERIFIABLE), None)
    if broken is not None:
        return broken
    counted = [v for v in verdicts if v.ok]
    unverified = [v.refusal for v in verdicts if v.refusal is not None]
    if not counted:
        return unverified[0]
    for want in expected:
        kind = (media_type(str(want["type"])) or str(want["type"])) if want.get("type") else None
        matches = [v for v in counted if kind is None or v.kind == kind]
        if not matches:
            claimed = next((v.refusal for v in verdicts if v.refusal is not None and v.kind == kind), None)
            got = ", ".join(f"{v.name} ({v.kind or 'no type'})" for v in verdicts)
            return claimed or Refusal(WRONG_TYPE, f"expected an output of type {kind}, got {got}",
                                      _REMEDIES[WRONG_TYPE])
        least = int(want.get("min_bytes", 1))
        if max(v.size for v in matches) < least:
            return Refusal(EMPTY, f"outputs of type {kind or 'any'} are smaller than {least} bytes")
    return None


# --- the readers: (description, parsed value), or _Refused ---------------------------------------------------------

Reader = Callable[[str, str, bytes], tuple[str, Any]]


def _reader(kind: str) -> Reader | None:
    if kind in _IMAGES:
        return _image
    if kind == "video/mp4":
        return _mp4
    if kind == "application/json" or kind.endswith("+json"):
        return _json
    if kind.startswith("text/"):
        return _text
    return None


def _utf8(name: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Refused(UNDECODABLE, f"{name}: not UTF-8 text: byte {exc.start} (0x{data[exc.start]:02x}): "
                                    f"{exc.reason}") from None


def _text(name: str, kind: str, data: bytes) -> tuple[str, Any]:
    text = _utf8(name, data)
    if not text.strip():
        raise _Refused(EMPTY, f"{name}: blank text ({len(data)} bytes of white space)")
    return f"text, {len(text):,} characters", text


def _json(name: str, kind: str, data: bytes) -> tuple[str, Any]:
    text = _utf8(name, data)
    try:
        value = json_text.loads(text, name)
    except UserError as exc:
        raise _Refused(UNDECODABLE, f"{name}: not valid JSON: {exc.what} (at {exc.place})") from None
    return f"JSON {type(value).__name__}", value


# --- images -------------------------------------------------------------------------------------------------------

#: the IEND chunk, the same in every PNG: length 0, its type, its CRC
_PNG_IEND: Final = b"\x00\x00\x00\x00IEND\xaeB`\x82"
_IMAGES: Final[dict[str, tuple[str, type[ImageFile.ImageFile]]]] = {
    "image/png": ("PNG", PngImagePlugin.PngImageFile), "image/jpeg": ("JPEG", JpegImagePlugin.JpegImageFile),
    "image/webp": ("WebP", WebPImagePlugin.WebPImageFile), "image/gif": ("GIF", GifImagePlugin.GifImageFile),
}


def _image(name: str, kind: str, data: bytes) -> tuple[str, Any]:
    label, _ = _IMAGES[kind]
    if ImageFile.LOAD_TRUNCATED_IMAGES:  # set by someone in this process: Pillow would fill in what is missing
        raise _Refused(UNVERIFIABLE, f"{name}: PIL.ImageFile.LOAD_TRUNCATED_IMAGES is set in this process, so "
                                     "Pillow would accept a cut image: no image can be verified")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            return _decoded(name, kind, data)
    except _Refused:
        raise
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise _Refused(BOMB, f"{name}: {exc}") from None
    except Exception as exc:  # whatever Pillow raises on bytes it cannot decode (OSError, SyntaxError, ...)
        other = _looks_like(data)
        why = f"the bytes are a {other}" if other and other.upper() != label.upper() else _pillow_says(exc)
        raise _Refused(UNDECODABLE, f"{name}: not a decodable {label}: {why}") from None


def _decoded(name: str, kind: str, data: bytes) -> tuple[str, Any]:
    """Open (the header only), check the size, verify, then decode every frame on a fresh image."""
    label, opener = _IMAGES[kind]
    buffer = io.BytesIO(data)
    with opener(buffer) as image:
        width, height = image.size
        if width <= 0 or height <= 0:
            raise _Refused(UNDECODABLE, f"{name}: a {label} of {width}x{height} pixels has none")
        if width * height > MAX_PIXELS:
            raise _Refused(BOMB, f"{name}: {width}x{height} pixels exceeds the cap of {MAX_PIXELS:,} pixels (a "
                                 "decompression bomb?)")
        frames = int(getattr(image, "n_frames", 1))
        if frames * width * height > MAX_DECODED_PIXELS:
            raise _Refused(BOMB, f"{name}: {frames} frames of {width}x{height} pixels exceed the cap of "
                                 f"{MAX_DECODED_PIXELS:,} pixels decoded")
        image.verify()
    end = _png_end(data, buffer.tell()) if kind == "image/png" else _ENDS[kind](data)
    if end is not None:
        raise _Refused(UNDECODABLE, f"{name}: not a whole {label}: {end}")
    with opener(io.BytesIO(data)) as image:  # verify() leaves the image unusable: decode a fresh one
        for frame in range(frames):
            image.seek(frame)
            image.load()
        mode = image.mode
    return f"{label} {width}x{height} {mode}" + (f", {frames} frames" if frames > 1 else ""), None


def _png_end(data: bytes, at: int) -> str | None:
    """Whether the IEND chunk Pillow's verify() stopped at (having read its length and type, not checked them or
    its CRC) is whole and the file's end."""
    if data[at - 8:at + 4] != _PNG_IEND:
        return "its IEND chunk is broken"
    return None if at + 4 == len(data) else f"{len(data) - at - 4} bytes follow its end (IEND)"


def _jpeg_end(data: bytes) -> str | None:
    return None if data.endswith(b"\xff\xd9") else "it does not end with the EOI marker (cut, or a foreign tail)"


def _webp_end(data: bytes) -> str | None:
    declared = struct.unpack_from("<I", data, 4)[0]
    whole = 8 + declared + (declared & 1)
    return None if whole == len(data) else f"its RIFF header says {whole} bytes, the file has {len(data)}"


def _gif_end(data: bytes) -> str | None:
    """Walk the blocks after the screen descriptor and colour table: extensions and images, each a run of
    sub-blocks ending in a zero, up to the trailer, which must be the last byte."""
    flags = data[10]
    at = 13 + (3 << ((flags & 7) + 1) if flags & 0x80 else 0)
    while at < len(data):
        block = data[at]
        if block == 0x3B:
            return None if at + 1 == len(data) else f"{len(data) - at - 1} bytes follow its trailer"
        if block == 0x21:
            at += 2
        elif block == 0x2C and at + 10 <= len(data):
            local = data[at + 9]
            at += 10 + (3 << ((local & 7) + 1) if local & 0x80 else 0) + 1  # descriptor, colour table, code size
        else:
            return f"byte {at} (0x{block:02x}) starts no block"
        while at < len(data) and data[at]:
            at += 1 + data[at]
        at += 1
    return "it ends before its trailer"


_ENDS: Final[dict[str, Callable[[bytes], str | None]]] = {
    "image/jpeg": _jpeg_end, "image/webp": _webp_end, "image/gif": _gif_end}


def _looks_like(data: bytes) -> str | None:
    """Which of the image types the bytes are (read from their header), if any."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(io.BytesIO(data), formats=[label.upper() for label, _ in _IMAGES.values()]) as image:
                return str(image.format)
    except Exception:  # not one of them, or a bomb: nothing to name
        return None


def _pillow_says(exc: BaseException) -> str:
    said = str(exc).strip() or type(exc).__name__
    return said if len(said) <= 200 else said[:200] + "…"


# --- MP4: the box structure -----------------------------------------------------------------------------------------

#: boxes that hold only boxes (ISO/IEC 14496-12), walked into
_CONTAINERS: Final = frozenset({b"moov", b"trak", b"mdia", b"minf", b"stbl", b"dinf", b"edts", b"mvex", b"moof",
                                b"traf", b"mfra"})


def _mp4(name: str, kind: str, data: bytes) -> tuple[str, Any]:
    seen: dict[bytes, int] = {}
    top = _boxes(name, data, 0, len(data), seen, depth=0)
    if not top or top[0] != b"ftyp":
        raise _Refused(UNDECODABLE, f"{name}: not an MP4: its first box is {_fourcc(top[0]) if top else 'missing'}, "
                                    "not ftyp")
    for needed in (b"moov", b"trak", b"mdat"):
        if not seen.get(needed):
            raise _Refused(UNDECODABLE, f"{name}: not a whole MP4: it has no {needed.decode()} box")
    return f"MP4, {sum(seen.values())} boxes", None


def _boxes(name: str, data: bytes, start: int, end: int, seen: dict[bytes, int], *, depth: int) -> list[bytes]:
    """The types of the boxes that tile data[start:end] exactly, walking into containers; _Refused otherwise."""
    found: list[bytes] = []
    at = start
    while at < end:
        if sum(seen.values()) >= MAX_BOXES or depth > 16:
            raise _Refused(UNDECODABLE, f"{name}: more than {MAX_BOXES:,} boxes or 16 levels of them")
        if end - at < 8:
            raise _Refused(UNDECODABLE, f"{name}: not a whole MP4: a box header is cut at byte {at}")
        size, kind = struct.unpack_from(">I4s", data, at)
        header = 8
        if size == 1:
            if end - at < 16:
                raise _Refused(UNDECODABLE, f"{name}: not a whole MP4: a box header is cut at byte {at}")
            size, header = struct.unpack_from(">Q", data, at + 8)[0], 16
        elif size == 0 and depth == 0:
            size = end - at  # the last box runs to the end of the file
        if size < header or at + size > end:
            raise _Refused(UNDECODABLE, f"{name}: not a whole MP4: box {_fourcc(kind)} at byte {at} says {size} "
                                        f"bytes, {end - at} are left")
        if kind in _CONTAINERS:
            _boxes(name, data, at + header, at + size, seen, depth=depth + 1)
        if kind != b"mdat" or size > header:
            seen[kind] = seen.get(kind, 0) + 1
        found.append(kind)
        at += size
    return found


def _fourcc(kind: bytes) -> str:
    return repr(kind.decode("latin-1"))
