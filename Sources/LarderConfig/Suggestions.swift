/// "Did you mean" hints by edit distance (config keys, and the command line's subcommands).
public enum Suggestions {
    /// The closest candidate within a distance that still looks like a typo: a third of the
    /// word's length (at least one edit), as rustc bounds its suggestions; a swap of two
    /// neighbouring letters is one edit. Further than that, a hint misleads more than it helps
    /// ("presets" is three edits from "parents").
    public static func closest(to word: String, in candidates: [String]) -> String? {
        let limit = max(1, word.count / 3)
        let lowered = Array(word.lowercased().utf8)
        var best: (String, Int)?
        for candidate in candidates {
            let distance = editDistance(lowered, Array(candidate.utf8))
            if distance <= limit, best == nil || distance < best!.1 { best = (candidate, distance) }
        }
        return best?.0
    }

    /// Levenshtein distance with adjacent transpositions counted as one edit (optimal string
    /// alignment).
    static func editDistance(_ a: [UInt8], _ b: [UInt8]) -> Int {
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var beforePrevious = [Int](repeating: 0, count: b.count + 1)
        var previous = Array(0...b.count)
        var current = [Int](repeating: 0, count: b.count + 1)
        for i in 1...a.count {
            current[0] = i
            for j in 1...b.count {
                let cost = a[i - 1] == b[j - 1] ? 0 : 1
                current[j] = min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + cost)
                if i > 1, j > 1, a[i - 1] == b[j - 2], a[i - 2] == b[j - 1] {
                    current[j] = min(current[j], beforePrevious[j - 2] + 1)
                }
            }
            (beforePrevious, previous, current) = (previous, current, beforePrevious)
        }
        return previous[b.count]
    }

    /// ` (did you mean 'x'?)` or an empty string.
    static func hint(for word: String, in candidates: [String]) -> String {
        closest(to: word, in: candidates).map { " (did you mean '\($0)'?)" } ?? ""
    }
}
