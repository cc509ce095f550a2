"""Pack the pipeline for ``spark-submit --py-files``: a zip of ``minikafka/__init__.py`` and
``minikafka/pipeline/``, the only parts of the package Spark's Python workers import.

    python -m minikafka.pipeline.pack /tmp/minikafka-pipeline.zip
"""

from __future__ import annotations

import sys
import zipfile
from pathlib import Path


def write_zip(dest: str | Path) -> Path:
    import minikafka

    dest = Path(dest)
    package_init = Path(minikafka.__file__)
    pipeline_dir = Path(__file__).resolve().parent
    with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.write(package_init, "minikafka/__init__.py")
        for source in sorted(pipeline_dir.glob("*.py")):
            zf.write(source, f"minikafka/pipeline/{source.name}")
    return dest


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) != 1:
        print("usage: python -m minikafka.pipeline.pack DEST.zip", file=sys.stderr)
        return 2
    print(write_zip(args[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
