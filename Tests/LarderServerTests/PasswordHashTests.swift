import LarderServer
import Testing

/// Password hashes through libxcrypt itself.
@Suite struct PasswordHashTests {
    /// bcrypt ignores what follows a password's 72nd byte: a longer password is refused when
    /// hashed, and one that begins as the real password does not pass for it.
    @Test func bcryptTakesNoPasswordLongerThanItReads() throws {
        let longest = String(repeating: "p", count: PasswordHash.bcryptMaxPasswordBytes)
        let hash = try PasswordHash.make(password: longest, prefix: "$2b$", cost: 4)
        #expect(PasswordHash.verify(password: longest, hash: hash))
        #expect(!PasswordHash.verify(password: longest + "anything", hash: hash))
        #expect(!PasswordHash.verify(password: String(longest.dropLast()), hash: hash))
        #expect(throws: PasswordHash.Failure.self) { try PasswordHash.make(password: longest + "x", prefix: "$2b$", cost: 4) }
        // Schemes that read the whole password take it.
        let long = String(repeating: "q", count: 200)
        let sha = try PasswordHash.make(password: long, prefix: "$6$", cost: 1000)
        #expect(PasswordHash.verify(password: long, hash: sha) && !PasswordHash.verify(password: long + "x", hash: sha))
    }
}
