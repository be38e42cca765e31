#!/usr/bin/env python3
"""A plain TCP forwarder for gpusched's fault tests: 127.0.0.1:LISTEN_PORT to 127.0.0.1:TARGET_PORT.
TLS passes through untouched (the API server's certificate names 127.0.0.1). Killing the process
cuts every connection through it at once, which is how a test takes the network away from a
client without touching the server. Usage: tcp_proxy.py LISTEN_PORT TARGET_PORT
"""
import asyncio
import sys

listen_port, target_port = int(sys.argv[1]), int(sys.argv[2])


async def pipe(reader, writer):
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, asyncio.CancelledError):
        pass
    finally:
        writer.close()


async def handle(cr, cw):
    try:
        sr, sw = await asyncio.open_connection("127.0.0.1", target_port)
    except OSError:
        cw.close()
        return
    await asyncio.gather(pipe(cr, sw), pipe(sr, cw))


async def main():
    srv = await asyncio.start_server(handle, "127.0.0.1", listen_port, reuse_address=True)
    async with srv:
        await srv.serve_forever()


asyncio.run(main())
