import argparse
import asyncio
import os

from .agent import main

parser = argparse.ArgumentParser(prog="python -m app.agents.mock", description="The built-in mock ACP agent")
parser.add_argument(
    "--pace-ms",
    type=int,
    default=int(os.environ.get("ACP_BRIDGE_MOCK_PACING_MS", "0") or 0),
    help="milliseconds between scripted steps (legacy: 200)",
)
args = parser.parse_args()
asyncio.run(main(args.pace_ms))
