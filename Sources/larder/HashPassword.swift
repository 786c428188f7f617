import ArgumentParser
import Glibc
import LarderConfig
import LarderServer

/// `larder hash-password NAME`: makes a `proxy.auth_users` entry.
struct HashPassword: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "hash-password",
        abstract: "Hash a password for proxy.auth_users.",
        discussion: """
            Prints NAME:HASH, ready to paste into proxy.auth_users. The password is
            read from the terminal (asked twice, not echoed), or as one line from
            standard input when that is not a terminal. The hash is crypt(3): salted
            and slow on purpose.
            Example:
              larder hash-password alice
              printf '%s\\n' "$PASSWORD" | larder hash-password alice
            then in larder.toml:
              [proxy]
              auth_users = ["alice:$y$j9T$..."]
            """)

    @Argument(help: "The user name (no ':' and no control characters).")
    var name: String

    @Option(help: "yescrypt (default), bcrypt or sha512crypt.")
    var scheme = "yescrypt"

    @Option(help: "The scheme's cost parameter; 0 picks its default.")
    var cost: UInt = 0

    func validate() throws {
        guard !name.isEmpty, !name.contains(":"), !name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            throw ValidationError("the user name must be non-empty, without ':' or control characters")
        }
        guard name.utf8.count <= ProxyUser.maxNameBytes else {
            throw ValidationError("the user name is \(ProxyUser.maxNameBytes) bytes at most")
        }
        guard PasswordHash.schemes.contains(where: { $0.name == scheme }) else {
            throw ValidationError("unknown scheme '\(scheme)'; one of \(PasswordHash.schemes.map(\.name).joined(separator: ", "))")
        }
    }

    func run() throws {
        let password: String
        if isatty(STDIN_FILENO) == 1 {
            let first = try Self.readSecret(prompt: "Password for \(name): ")
            let second = try Self.readSecret(prompt: "Again: ")
            guard first == second else {
                printError("the passwords do not match")
                throw ExitCode(1)
            }
            password = first
        } else {
            guard let line = readLine(strippingNewline: true) else {
                printError("no password on standard input")
                throw ExitCode(1)
            }
            password = line
        }
        guard !password.isEmpty else {
            printError("the password is empty")
            throw ExitCode(1)
        }
        guard password.utf8.count <= PasswordHash.maxPasswordBytes else {
            printError("the password is \(PasswordHash.maxPasswordBytes) bytes at most (crypt(3) takes no longer)")
            throw ExitCode(1)
        }
        let prefix = PasswordHash.schemes.first(where: { $0.name == scheme })!.prefix
        do {
            print("\(name):\(try PasswordHash.make(password: password, prefix: prefix, cost: cost))")
        } catch {
            printError("cannot hash: \(error)")
            throw ExitCode(1)
        }
    }

    private static func writeToTerminal(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }

    /// Reads a line from the terminal with echo off.
    private static func readSecret(prompt: String) throws -> String {
        writeToTerminal(prompt)
        var saved = termios()
        let canHideInput = tcgetattr(STDIN_FILENO, &saved) == 0
        if canHideInput {
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(STDIN_FILENO, TCSAFLUSH, &quiet)
        }
        defer {
            if canHideInput { tcsetattr(STDIN_FILENO, TCSAFLUSH, &saved) }
            writeToTerminal("\n")
        }
        guard let line = readLine(strippingNewline: true) else { throw ExitCode(1) }
        return line
    }
}
