"""``python -m app`` and the ``acp-rest-bridge`` command."""

from app.main import cli


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
