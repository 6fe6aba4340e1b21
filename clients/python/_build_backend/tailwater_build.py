"""A PEP 517 build backend for the ``tailwater`` package, standard library only.

pip runs a backend in an isolated environment holding only the backend's ``requires``; with
setuptools there, an offline machine cannot build. This backend needs nothing: it reads the
``[project]`` fields it uses from pyproject.toml and writes the wheel with ``zipfile``
(``*.dist-info/METADATA``, ``WHEEL`` and ``RECORD`` with each file's sha256 and size), or an
sdist with ``tarfile``. It writes only into the directory pip hands it.
"""

from __future__ import annotations

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile
from pathlib import Path
from typing import Dict, List, Optional, Tuple

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = "tailwater"
TAG = "py3-none-any"
# Zip entries carry this date unless SOURCE_DATE_EPOCH says otherwise: the same sources give
# the same wheel, byte for byte.
DEFAULT_DATE = (2026, 1, 1, 0, 0, 0)


def _project() -> Dict[str, str]:
    """The simple ``key = "value"`` fields of pyproject.toml's ``[project]`` table (tomllib is
    not in Python 3.9, and these fields need no more)."""
    fields: Dict[str, str] = {}
    table = None
    for raw in (ROOT / "pyproject.toml").read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if line.startswith("["):
            table = line.strip("[] ")
            continue
        match = re.fullmatch(r'([A-Za-z0-9_-]+)\s*=\s*"([^"\\]*)"', line)
        if table == "project" and match:
            fields[match.group(1)] = match.group(2)
    for required in ("name", "version"):
        if required not in fields:
            raise RuntimeError(f"pyproject.toml's [project] table has no {required}.")
    return fields


def _dist_info(fields: Dict[str, str]) -> str:
    return f"{fields['name'].replace('-', '_')}-{fields['version']}.dist-info"


def _metadata(fields: Dict[str, str]) -> str:
    lines = [
        "Metadata-Version: 2.1",
        f"Name: {fields['name']}",
        f"Version: {fields['version']}",
    ]
    if "description" in fields:
        lines.append(f"Summary: {fields['description']}")
    if "requires-python" in fields:
        lines.append(f"Requires-Python: {fields['requires-python']}")
    if "license" in fields:
        lines.append(f"License: {fields['license']}")
    lines += [
        "Classifier: Programming Language :: Python :: 3",
        "Classifier: Typing :: Typed",
        "Description-Content-Type: text/markdown",
        "",
        "The Python client of Tailwater (standard library only): `Client`, `Publisher`,",
        "`TailwaterHandler` and `tail`. See docs/PYTHON.md in the Tailwater repository.",
        "",
    ]
    return "\n".join(lines)


def _wheel_file() -> str:
    return "\n".join(
        [
            "Wheel-Version: 1.0",
            "Generator: tailwater_build",
            "Root-Is-Purelib: true",
            f"Tag: {TAG}",
            "",
        ]
    )


def _package_files() -> List[Tuple[str, bytes]]:
    """The package's sources and py.typed, by their path inside the wheel, in a fixed order."""
    files = []
    for path in sorted((ROOT / PACKAGE).rglob("*")):
        if path.is_dir() or "__pycache__" in path.parts or path.suffix in (".pyc", ".pyo"):
            continue
        files.append((path.relative_to(ROOT).as_posix(), path.read_bytes()))
    return files


def _date() -> Tuple[int, int, int, int, int, int]:
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch and epoch.isdigit():
        return time.gmtime(max(int(epoch), 315532800))[:6]  # zip cannot go before 1980
    return DEFAULT_DATE


def _record_line(name: str, data: bytes) -> str:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode("ascii")
    return f"{name},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory: str, files: List[Tuple[str, bytes]]) -> str:
    fields = _project()
    dist_info = _dist_info(fields)
    files = files + [
        (f"{dist_info}/METADATA", _metadata(fields).encode("utf-8")),
        (f"{dist_info}/WHEEL", _wheel_file().encode("utf-8")),
        (f"{dist_info}/top_level.txt", f"{PACKAGE}\n".encode("utf-8")),
    ]
    record_name = f"{dist_info}/RECORD"
    lines = [_record_line(name, data) for name, data in files] + [f"{record_name},,", ""]
    record = "\n".join(lines)
    files.append((record_name, record.encode("utf-8")))
    filename = f"{fields['name'].replace('-', '_')}-{fields['version']}-{TAG}.whl"
    date = _date()
    target = Path(wheel_directory) / filename
    with zipfile.ZipFile(target, "w", compression=zipfile.ZIP_DEFLATED) as wheel:
        for name, data in files:
            info = zipfile.ZipInfo(name, date_time=date)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            wheel.writestr(info, data)
    return filename


# PEP 517 hooks -------------------------------------------------------------------------------


def get_requires_for_build_wheel(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_sdist(config_settings: Optional[dict] = None) -> List[str]:
    return []


def get_requires_for_build_editable(config_settings: Optional[dict] = None) -> List[str]:
    return []


def prepare_metadata_for_build_wheel(
    metadata_directory: str, config_settings: Optional[dict] = None
) -> str:
    fields = _project()
    dist_info = Path(metadata_directory) / _dist_info(fields)
    dist_info.mkdir(parents=True, exist_ok=True)
    (dist_info / "METADATA").write_text(_metadata(fields), encoding="utf-8")
    (dist_info / "WHEEL").write_text(_wheel_file(), encoding="utf-8")
    return dist_info.name


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(
    wheel_directory: str,
    config_settings: Optional[dict] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    return _write_wheel(wheel_directory, _package_files())


def build_editable(
    wheel_directory: str,
    config_settings: Optional[dict] = None,
    metadata_directory: Optional[str] = None,
) -> str:
    """PEP 660: a wheel whose one ``.pth`` file puts this source tree on ``sys.path``."""
    pth = f"{ROOT}\n".encode("utf-8")
    return _write_wheel(wheel_directory, [(f"__editable__.{PACKAGE}.pth", pth)])


def build_sdist(sdist_directory: str, config_settings: Optional[dict] = None) -> str:
    fields = _project()
    base = f"{fields['name']}-{fields['version']}"
    members: List[Tuple[str, bytes]] = [("pyproject.toml", (ROOT / "pyproject.toml").read_bytes())]
    members += [
        (path.relative_to(ROOT).as_posix(), path.read_bytes())
        for path in sorted((ROOT / "_build_backend").glob("*.py"))
    ]
    members += _package_files()
    members.append(("PKG-INFO", _metadata(fields).encode("utf-8")))
    filename = f"{base}.tar.gz"
    mtime = int(time.mktime(_date() + (0, 0, -1)))
    with tarfile.open(Path(sdist_directory) / filename, "w:gz", format=tarfile.PAX_FORMAT) as sdist:
        for name, data in members:
            info = tarfile.TarInfo(f"{base}/{name}")
            info.size = len(data)
            info.mode = 0o644
            info.mtime = mtime
            sdist.addfile(info, io.BytesIO(data))
    return filename
