import Glibc
import LarderIO

/// Secrets kept out of the configuration file: `admin.token_file` and `proxy.auth_users_file`,
/// read whenever the configuration is (start, SIGHUP, check-config). A path may start with
/// `${CREDENTIALS_DIRECTORY}/`, where systemd's `LoadCredential=` puts them for the service.
extension ConfigDecoder {
    /// `text` with `${CREDENTIALS_DIRECTORY}` expanded, or resolved against the state
    /// directory when relative; nil (and an error) when the variable is unset.
    mutating func secretPath(_ text: String, at position: SourcePosition) -> String? {
        let variable = "${CREDENTIALS_DIRECTORY}"
        guard text.hasPrefix(variable) else { return stateDirectory?.resolve(text) ?? text }
        guard let directory = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }), !directory.isEmpty else {
            fail(
                "'\(text)' names ${CREDENTIALS_DIRECTORY}, which is not set (systemd sets it for a unit with LoadCredential=)",
                at: position)
            return nil
        }
        return directory + text.dropFirst(variable.count)
    }

    /// The credential names Larder looks for in `$CREDENTIALS_DIRECTORY` (systemd's
    /// `LoadCredential=admin-token:...`): each applies when the configuration names no file of
    /// its own, so the shipped unit guards the admin calls without an edit to the configuration.
    public static let adminTokenCredential = "admin-token"
    public static let proxyUsersCredential = "proxy-users"

    /// Reads the credentials systemd passed (see ``adminTokenCredential``) that the configuration
    /// leaves to them: an inline `admin.token` or a `*_file` key wins.
    mutating func applyCredentials(_ config: inout Config) {
        guard let directory = getenv("CREDENTIALS_DIRECTORY").map({ String(cString: $0) }), !directory.isEmpty else { return }
        let start = SourcePosition(line: 1, column: 1)
        let token = directory + "/" + Self.adminTokenCredential
        if tokenPosition == nil, tokenFilePosition == nil, access(token, F_OK) == 0 {
            readTokenFile(token, at: start, into: &config)
            tokenFilePosition = nil
        }
        let users = directory + "/" + Self.proxyUsersCredential
        if config.proxy.authUsersFile.isEmpty, access(users, F_OK) == 0 {
            readUsersFile(users, at: start, into: &config)
        }
    }

    /// `text` without surrounding ASCII white space (space, tab, CR, LF).
    static func trimmed(_ text: Substring) -> String {
        let isSpace: (Character) -> Bool = { $0 == " " || $0 == "\t" || $0 == "\r" || $0 == "\n" || $0 == "\r\n" }
        guard let first = text.firstIndex(where: { !isSpace($0) }), let last = text.lastIndex(where: { !isSpace($0) }) else { return "" }
        return String(text[first...last])
    }

    /// The file's text, or nil after an error naming it.
    mutating func readSecret(_ path: String, key: String, at position: SourcePosition) -> String? {
        do {
            return String(decoding: try FileSystem.readWhole(path, limit: 1 << 20), as: UTF8.self)
        } catch {
            fail("\(key): cannot read '\(path)': \(error.message)", at: position)
            return nil
        }
    }

    /// `admin.token_file`: the token is the file's text, less surrounding white space.
    mutating func readTokenFile(_ text: String, at position: SourcePosition, into config: inout Config) {
        tokenFilePosition = position
        guard let path = secretPath(text, at: position), let contents = readSecret(path, key: "admin.token_file", at: position) else {
            return
        }
        let token = Self.trimmed(contents[...])
        guard !token.isEmpty else {
            fail("admin.token_file: '\(path)' is empty", at: position)
            return
        }
        config.admin.token = token
        config.admin.tokenFile = path
    }

    /// `proxy.auth_users_file`: one `name:hash` per line, as `auth_users` entries; `#` starts a
    /// comment. Its users join `auth_users`'.
    mutating func readUsersFile(_ text: String, at position: SourcePosition, into config: inout Config) {
        guard let path = secretPath(text, at: position), let contents = readSecret(path, key: "proxy.auth_users_file", at: position)
        else { return }
        var users = config.proxy.authUsers
        var failed = false
        for (number, line) in contents.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let entry = Self.trimmed(line)
            if entry.isEmpty || entry.hasPrefix("#") { continue }
            let before = errors.count
            if let user = proxyUser(entry, at: position, seen: users) {
                users.append(user)
            } else if errors.count > before {
                // Name the line of the users file, not only the key that named it.
                let error = errors.removeLast()
                fail("\(path):\(number + 1): \(error.message)", at: position)
                failed = true
            }
        }
        if !failed {
            config.proxy.authUsers = users
            config.proxy.authUsersFile = path
        }
    }

    /// `name:hash` from `proxy.auth_users`. A plain password is refused: the file must never
    /// hold one.
    mutating func proxyUser(_ text: String, at position: SourcePosition, seen: [ProxyUser]) -> ProxyUser? {
        guard let colon = text.firstIndex(of: ":") else {
            fail("auth_users entries look like \"name:$y$...\" (make one with `larder hash-password NAME`), got \"\(text)\"", at: position)
            return nil
        }
        let name = String(text[..<colon])
        let hash = String(text[text.index(after: colon)...])
        // RFC 7617 §2: the user-id cannot contain a colon; control characters are refused too.
        guard !name.isEmpty, !name.utf8.contains(where: { $0 < 0x20 || $0 == 0x7F }) else {
            fail("auth_users: the user name before ':' must be non-empty printable text", at: position)
            return nil
        }
        guard name.utf8.count <= ProxyUser.maxNameBytes else {
            fail("auth_users: a user name is \(ProxyUser.maxNameBytes) bytes at most, got \(name.utf8.count)", at: position)
            return nil
        }
        guard ProxyUser.hashPrefixes.contains(where: { hash.hasPrefix($0) }),
            !hash.utf8.contains(where: { $0 <= 0x20 || $0 >= 0x7F })
        else {
            fail(
                "auth_users: the password of '\(name)' must be a crypt(3) hash starting with one of "
                    + ProxyUser.hashPrefixes.joined(separator: " ") + " (make one with `larder hash-password \(name)`); "
                    + "plain passwords are not accepted", at: position)
            return nil
        }
        if seen.contains(where: { $0.name == name }) {
            fail("auth_users: user '\(name)' is listed twice", at: position)
            return nil
        }
        return ProxyUser(name: name, passwordHash: hash)
    }

}
