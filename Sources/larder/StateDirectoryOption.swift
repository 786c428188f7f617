import ArgumentParser

/// The `--state-dir` option's help, shared by every command that reads a configuration.
enum StateDirectoryOption {
    static let help = ArgumentHelp(
        "What relative paths in the configuration resolve against (default: $STATE_DIRECTORY, else /var/lib/larder "
            + "for a file in /etc/larder, else the file's directory).")
}
