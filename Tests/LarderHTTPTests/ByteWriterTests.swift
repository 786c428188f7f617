import LarderHTTP
import Testing

@Suite(.timeLimit(.minutes(1))) struct ByteWriterTests {
    /// Text of every kind, literals, bytes, padded numbers and filled spans land in order.
    @Test func writesEachPieceInOrder() {
        let text = String(unsafeUninitializedCapacity: 64) { buffer in
            var writer = ByteWriter(buffer)
            writer.append("http")
            writer.append("://" as StaticString)
            writer.append("example.org:8080/a?b"[...].dropLast(9))  // a Substring: "example.org"
            writer.append(UInt8(ascii: ":"))
            writer.append(42, zeroPaddedTo: 5)
            writer.append(length: 3) { span in
                for index in span.indices { span[index] = UInt8(ascii: "x") }
            }
            writer.append("é")  // non-ASCII text keeps its UTF-8
            return writer.count
        }
        #expect(text == "http://example.org:00042xxxé")
    }

    @Test func decimalsTakeAsManyDigitsAsTheyNeed() {
        // Each side of every power of ten the digit count turns at, up to the largest in an Int.
        var values = [0, Int.max]
        var power = 10
        for _ in 1...18 {
            values += [power - 1, power]
            if power <= Int.max / 10 { power *= 10 }
        }
        let bytes = [UInt8](unsafeUninitializedCapacity: 1024) { buffer, count in
            var writer = ByteWriter(buffer)
            for value in values {
                writer.append(decimal: value)
                writer.append(UInt8(ascii: " "))
            }
            count = writer.count
        }
        #expect(String(decoding: bytes, as: UTF8.self) == values.map { "\($0) " }.joined())
    }

    @Test func zeroPaddingFillsTheWholeWidth() {
        let bytes = [UInt8](unsafeUninitializedCapacity: 8) { buffer, count in
            var writer = ByteWriter(buffer)
            writer.append(0, zeroPaddedTo: 3)
            writer.append(12345, zeroPaddedTo: 5)
            count = writer.count
        }
        #expect(String(decoding: bytes, as: UTF8.self) == "00012345")
    }
}
