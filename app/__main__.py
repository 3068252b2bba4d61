"""``python -m app`` and the ``acp-rest-bridge`` command."""

import gc

# Start-up makes hundreds of thousands of objects (modules, models, the application) that live as
# long as the server, and next to no garbage: the cyclic collector, which would walk them again and
# again while they are made, is off until the application is built (``app.main.settle_memory``).
gc.disable()

from app.main import cli  # noqa: E402


def main() -> None:
    cli()


if __name__ == "__main__":
    main()
