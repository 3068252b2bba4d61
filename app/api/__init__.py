from ._fastapi_compat import install

install()
