import CCrypt
import Glibc

/// Password hashes for proxy authentication, made and checked by the system's crypt(3)
/// (libxcrypt): the same salted, deliberately slow schemes `/etc/shadow` uses, so no
/// home-made cryptography and hashes that `mkpasswd` or `openssl passwd -6` can also produce.
///
/// This is the only file that calls libxcrypt. Both functions are slow on purpose (tens of
/// milliseconds for yescrypt): callers run them off the event loops.
public enum PasswordHash {
    /// A failure to make a hash (an unknown scheme, or no randomness available).
    public struct Failure: Error, CustomStringConvertible {
        public let description: String
    }

    /// The longest password crypt(3) hashes, in bytes: libxcrypt's `CRYPT_MAX_PASSPHRASE_SIZE`
    /// (512) counts the terminating NUL.
    public static let maxPasswordBytes = 511

    /// The longest password bcrypt reads: it ignores every byte after the 72nd, so a longer
    /// one would also match every password that begins the same. Such a password is refused
    /// when hashed, and never matches a bcrypt hash when checked.
    public static let bcryptMaxPasswordBytes = 72

    /// Whether `hash` (or a setting) is bcrypt's: `$2a$`, `$2b$`, `$2x$` or `$2y$`.
    static func isBcrypt(_ hash: some StringProtocol) -> Bool { hash.hasPrefix("$2") }

    /// The schemes `larder hash-password` offers, by name, with their crypt(3) prefix.
    public static let schemes: [(name: String, prefix: String)] = [
        ("yescrypt", "$y$"), ("bcrypt", "$2b$"), ("sha512crypt", "$6$"),
    ]

    /// Hashes `password` with a fresh random salt. `cost` 0 picks the scheme's default.
    public static func make(password: String, prefix: String = "$y$", cost: UInt = 0) throws(Failure) -> String {
        guard !password.utf8.contains(0) else { throw Failure(description: "the password contains a NUL byte") }
        if isBcrypt(prefix) && password.utf8.count > bcryptMaxPasswordBytes {
            throw Failure(
                description: "bcrypt reads only the first \(bcryptMaxPasswordBytes) bytes of a password: use yescrypt, or a "
                    + "password of at most \(bcryptMaxPasswordBytes) bytes")
        }
        var setting = [CChar](repeating: 0, count: Int(CRYPT_GENSALT_OUTPUT_SIZE))
        // A nil random-bytes argument makes libxcrypt read the salt from the OS's CSPRNG.
        guard crypt_gensalt_rn(prefix, cost, nil, 0, &setting, Int32(setting.count)) != nil else {
            throw Failure(description: "cannot make a salt for '\(prefix)' (cost \(cost)): \(String(cString: strerror(errno)))")
        }
        guard let hash = hash(password, setting: setting) else {
            throw Failure(description: "crypt(3) refused the setting made for '\(prefix)'")
        }
        return hash
    }

    /// Whether `password` matches `hash`, compared in constant time. A password longer than
    /// bcrypt reads never matches a bcrypt hash (``bcryptMaxPasswordBytes``).
    public static func verify(password: String, hash: String) -> Bool {
        if isBcrypt(hash) && password.utf8.count > bcryptMaxPasswordBytes { return false }
        guard !password.utf8.contains(0), let computed = self.hash(password, setting: hash.utf8CString) else { return false }
        let expected = Array(hash.utf8)
        let actual = Array(computed.utf8)
        guard expected.count == actual.count else { return false }
        var difference: UInt8 = 0
        for index in 0..<expected.count { difference |= expected[index] ^ actual[index] }
        return difference == 0
    }

    private static func hash(_ password: String, setting: some Collection<CChar>) -> String? {
        // crypt_data is 32 KiB: on the heap, zeroed as crypt_rn requires before first use.
        let data = UnsafeMutablePointer<crypt_data>.allocate(capacity: 1)
        defer {
            // Wipe the intermediate state (it holds password-derived bytes) before freeing.
            memset(data, 0, MemoryLayout<crypt_data>.size)
            data.deallocate()
        }
        memset(data, 0, MemoryLayout<crypt_data>.size)
        let settingBytes = Array(setting)
        let result = settingBytes.withUnsafeBufferPointer { settingPointer in
            crypt_rn(password, settingPointer.baseAddress, data, Int32(MemoryLayout<crypt_data>.size))
        }
        guard let result else { return nil }
        let text = String(cString: result)
        // Failure tokens start with '*' (libxcrypt never returns them from crypt_rn, but be sure).
        return text.hasPrefix("*") ? nil : text
    }
}
