"""``pip install ./clients/python`` works offline and installs a correct wheel."""

from __future__ import annotations

import base64
import csv
import hashlib
import os
import subprocess
import sys
import tempfile
import unittest
import zipfile
from pathlib import Path

import support

import tailwater

PROBE = (
    "import tailwater\n"
    "from tailwater import Client, Publisher, TailwaterHandler, tail\n"
    "print(tailwater.__file__)\n"
    "print(tailwater.__version__)\n"
)


def source_files() -> set:
    return {
        path.relative_to(support.PACKAGE_ROOT).as_posix()
        for path in support.PACKAGE_ROOT.rglob("*")
        if path.is_file() and "__pycache__" not in path.parts
    }


class InstallTest(unittest.TestCase):
    def test_pip_installs_it_without_an_index_and_it_imports(self) -> None:
        before = source_files()
        with tempfile.TemporaryDirectory() as target:
            env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1", "PIP_DISABLE_PIP_VERSION_CHECK": "1"}
            # --no-index: were anything to be downloaded (a setuptools for the build), this fails.
            install = subprocess.run(
                [sys.executable, "-m", "pip", "install", "--no-index", "--no-cache-dir"]
                + ["--target", target, str(support.PACKAGE_ROOT)],
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )
            self.assertEqual(install.returncode, 0, install.stdout + install.stderr)

            # Imported from the target, from elsewhere (not the source tree on sys.path).
            probe = subprocess.run(
                [sys.executable, "-c", PROBE],
                env={**env, "PYTHONPATH": target},
                cwd=tempfile.gettempdir(),
                capture_output=True,
                text=True,
                timeout=60,
            )
            self.assertEqual(probe.returncode, 0, probe.stderr)
            location, version = probe.stdout.split()
            self.assertTrue(Path(location).resolve().is_relative_to(Path(target).resolve()), location)
            self.assertEqual(version, tailwater.__version__)

            dist_info = Path(target) / f"tailwater-{tailwater.__version__}.dist-info"
            metadata = (dist_info / "METADATA").read_text(encoding="utf-8")
            self.assertIn("Name: tailwater\n", metadata)
            self.assertIn(f"Version: {tailwater.__version__}\n", metadata)
            self.assertIn("Requires-Python: >=3.9\n", metadata)
            self.assertTrue((Path(target) / "tailwater" / "py.typed").exists())
            installed = {p.name for p in (Path(target) / "tailwater").glob("*.py")}
            self.assertEqual(installed, {p.name for p in (support.PACKAGE_ROOT / "tailwater").glob("*.py")})
        # The build wrote nothing into the source tree.
        self.assertEqual(source_files(), before)

    def test_the_wheel_has_metadata_wheel_and_a_record_that_verifies(self) -> None:
        sys.path.insert(0, str(support.PACKAGE_ROOT / "_build_backend"))
        try:
            import tailwater_build
        finally:
            sys.path.remove(str(support.PACKAGE_ROOT / "_build_backend"))
        with tempfile.TemporaryDirectory() as out:
            name = tailwater_build.build_wheel(out)
            self.assertEqual(name, f"tailwater-{tailwater.__version__}-py3-none-any.whl")
            with zipfile.ZipFile(Path(out) / name) as wheel:
                self.assertIsNone(wheel.testzip())
                names = set(wheel.namelist())
                dist_info = f"tailwater-{tailwater.__version__}.dist-info"
                wheel_file = wheel.read(f"{dist_info}/WHEEL").decode()
                self.assertIn("Wheel-Version: 1.0\n", wheel_file)
                self.assertIn("Root-Is-Purelib: true\n", wheel_file)
                self.assertIn("Tag: py3-none-any\n", wheel_file)
                rows = list(csv.reader(wheel.read(f"{dist_info}/RECORD").decode().splitlines()))
                self.assertEqual({row[0] for row in rows}, names)
                for path, digest, size in rows:
                    if path == f"{dist_info}/RECORD":
                        self.assertEqual((digest, size), ("", ""))
                        continue
                    data = wheel.read(path)
                    expected = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
                    self.assertEqual((digest, int(size)), (f"sha256={expected}", len(data)), path)
                self.assertIn("tailwater/py.typed", names)
                self.assertFalse([n for n in names if "__pycache__" in n or n.endswith(".pyc")])
            # The same sources make the same wheel, byte for byte.
            first = (Path(out) / name).read_bytes()
            (Path(out) / name).unlink()
            tailwater_build.build_wheel(out)
            self.assertEqual((Path(out) / name).read_bytes(), first)


if __name__ == "__main__":
    unittest.main()
