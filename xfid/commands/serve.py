"""`xfid serve`: the tracker in the browser and a JSON API over the configured store."""

from __future__ import annotations

import click

from xfid.app import App
from xfid.textsafe import echo


@click.command("serve")
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", type=click.IntRange(0, 65535), default=8470, show_default=True, help="Port to listen on.")
@click.option("--max-upload", "max_upload", type=click.IntRange(1), default=512, show_default=True, metavar="MIB",
              help="Largest POST /api/ingest body, in MiB (larger: 413).")
@click.pass_obj
def cli(app: App, host, port, max_upload) -> None:
    """Serve the store's tracker as web pages and a JSON API (needs pip install 'xfid[serve]').

    Sign in with a token from `xfid token create NAME --role reader|writer|admin`; scripts send
    `Authorization: Bearer TOKEN`. See docs/serve.md for the pages and the API.
    """
    from xfid.errors import XfidError

    try:
        import uvicorn

        from xfid.serve.app import make_app
    except ImportError as e:
        raise XfidError(f"xfid serve needs the serve extra: pip install 'xfid[serve]' ({e.name} is missing)") from None
    web = make_app(app.store_opt, app.config, max_upload=max_upload * 2**20)
    echo(f"xfid serve: http://{host}:{port}/ over {app.store_path} (Ctrl-C stops)")
    uvicorn.run(web, host=host, port=port, log_level="warning", access_log=False)
