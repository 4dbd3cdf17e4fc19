import sys

if sys.argv[:1] == ["-m"]:  # `python -m pipe_clustered.clean_x`: see data_io.util.interrupt
    from data_io.util.interrupt import quiet_while_starting

    quiet_while_starting("clean")
