/// Which stored URLs a ban or a listing covers: those starting with a prefix, or matching a glob
/// whose `*` stands for any run of characters (slashes included) and every other character for
/// itself. Compared with the stored key as it is kept: scheme and host lower case, the default
/// port left out, percent-escapes upper case.
enum BanPattern: Sendable, Equatable, CustomStringConvertible {
    case prefix(String)
    case glob(String)

    func matches(_ url: String) -> Bool {
        switch self {
        case .prefix(let prefix): url.hasPrefix(prefix)
        case .glob(let glob): BanPattern.glob(Array(glob.utf8), matches: Array(url.utf8))
        }
    }

    var description: String {
        switch self {
        case .prefix(let prefix): "prefix \(prefix)"
        case .glob(let glob): "glob \(glob)"
        }
    }

    /// Iterative glob match with one backtrack point per `*` (the last one seen): linear in
    /// practice, never exponential.
    static func glob(_ pattern: [UInt8], matches text: [UInt8]) -> Bool {
        var p = 0
        var t = 0
        var star: Int?
        var resume = 0
        while t < text.count {
            if p < pattern.count, pattern[p] == UInt8(ascii: "*") {
                star = p
                p += 1
                resume = t
            } else if p < pattern.count, pattern[p] == text[t] {
                p += 1
                t += 1
            } else if let star {
                p = star + 1
                resume += 1
                t = resume
            } else {
                return false
            }
        }
        while p < pattern.count, pattern[p] == UInt8(ascii: "*") { p += 1 }
        return p == pattern.count
    }
}
