"""`python -m voxcli` is the same program as the `voxcli` console script."""
import sys

from voxcli.cli.errors import install_signal_handlers, interrupt_exit_code

if __name__ == "__main__":
    install_signal_handlers()  # before the app's imports, so SIGTERM during start-up also exits 143
    try:
        from voxcli.cli.app import main
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM while importing: no traceback
        sys.exit(int(interrupt_exit_code(e)))
    main()
