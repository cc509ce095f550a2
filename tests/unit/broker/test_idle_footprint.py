"""What keeps an idle broker small (issue 24): listener sockets for IP literals bound without the
loop's name resolution, argparse's formatter without shutil."""

import socket

import pytest

from minikafka.broker import cli
from minikafka.broker.security.server import _bound_socket


@pytest.mark.parametrize("host, family", [("127.0.0.1", socket.AF_INET), ("0.0.0.0", socket.AF_INET),
                                          ("::1", socket.AF_INET6)])
def test_ip_literal_listeners_are_bound_here(host, family):
    try:
        sock = _bound_socket(host, 0)
    except OSError as exc:  # no IPv6 on this machine
        pytest.skip(str(exc))
    try:
        assert sock.family == family and sock.getsockname()[1] > 0
        assert not sock.getblocking()
        if family == socket.AF_INET6:
            assert sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY) == 1
        # it listens: a client connects
        with socket.create_connection(sock.getsockname()[:2], timeout=5):
            pass
    finally:
        sock.close()


@pytest.mark.parametrize("host", ["localhost", "", None, "broker.example"])
def test_host_names_are_left_to_the_loop(host):
    assert _bound_socket(host, 0) is None


def test_help_is_formatted_to_the_terminal_width_without_shutil(monkeypatch, capsys):
    def help_lines(columns):
        monkeypatch.setenv("COLUMNS", str(columns))
        assert cli._terminal_columns() == columns
        with pytest.raises(SystemExit):
            cli.build_parser(serve_only=True).parse_args(["serve", "--help"])
        out = capsys.readouterr().out
        assert "--data-dir" in out and "max.message.bytes" in out  # the settings epilog too
        return out.split("Kafka settings")[0].splitlines()

    narrow, wide = help_lines(60), help_lines(200)
    assert len(narrow) > len(wide)  # the options' help is wrapped at the width found
    assert max(len(line) for line in narrow if line.startswith("  -")) <= 60
    monkeypatch.setenv("COLUMNS", "not a number")
    assert cli._terminal_columns() >= 1
