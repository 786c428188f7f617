import LarderHTTP

extension FuzzTarget {
    /// The known-field tags of `headers` against a naive reference: for every ``KnownField``,
    /// whether it is present and its values, read by tag, equal those found by comparing every
    /// field's name with ``KnownField/name`` byte by byte, ignoring ASCII case. Checked as parsed,
    /// after removing one other field (picked by `pick`), after hop-by-hop stripping, and after a
    /// set and an append. A tag that misses an `Authorization` or `Set-Cookie`, or invents a
    /// `Content-Length`, is a private response shared or a desynchronised connection.
    static func checkKnownFieldTags(_ headers: HTTPHeaders, pick: Int) {
        var headers = headers
        compareTags(headers, "parsed")
        var names: [[UInt8]] = []
        headers.forEachField { name, _ in names.append(Array(name)) }
        if !names.isEmpty {
            let doomed = names[pick % names.count]
            headers.removeFields(whereName: { $0.elementsEqual(doomed) })
            compareTags(headers, "after removing \(doomed)")
        }
        var stripped = headers
        HopByHop.strip(&stripped)
        compareTags(stripped, "after HopByHop.strip")
        let field = KnownField.allCases[pick % KnownField.allCases.count]
        headers.set(String(describing: field.name).uppercased(), "x")
        compareTags(headers, "after setting \(field)")
        headers.remove(String(describing: field.name).lowercased())
        compareTags(headers, "after removing \(field) by name")
        headers.add(String(describing: field.name), "y")
        compareTags(headers, "after adding \(field)")
    }

    private static func compareTags(_ headers: HTTPHeaders, _ when: String) {
        for field in KnownField.allCases {
            var naive: [[UInt8]] = []
            headers.forEachField { name, value in
                if ASCII.equalsIgnoringCase(name, field.name) { naive.append(Array(value)) }
            }
            var tagged: [[UInt8]] = []
            headers.forEachValue(of: field) { tagged.append(Array($0)) }
            precondition(headers.contains(field) == !naive.isEmpty, "\(field): contains is \(headers.contains(field)) \(when)")
            precondition(tagged == naive, "\(field): values by tag \(tagged), by name \(naive), \(when)")
            let first = headers[field].map { Array($0.unicodeScalars.map { UInt8(truncatingIfNeeded: $0.value) }) }
            precondition(first == naive.first, "\(field): first value by tag \(String(describing: first)) \(when)")
            precondition(headers.values(String(describing: field.name)).count == naive.count, "\(field): values(String) \(when)")
        }
    }
}
