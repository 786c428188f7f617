import Foundation
import Glibc
import Testing

extension IntegrationTests {
    /// What Larder makes of an origin's answer to a slice request (`cache.slice_size`) that is
    /// not the slice it asked for (RFC 9110 §14, §15.3.7): the client gets exactly the bytes
    /// at the positions it asked for, from that answer when it holds them, else from the
    /// origin asked again with the client's own Range; never a 502 while they are there, and
    /// never bytes from elsewhere. A scripted origin answers each case; curl checks the bytes.
    @Suite(.timeLimit(.minutes(2))) struct SliceAnswers {
        static let config = "[cache]\nslice_size = \"64KiB\"\n"
        static let slice = 64 << 10
        static let length = 100_000
        static let target = "/sliced"
        static let etag = "\"s1\""

        /// The object's bytes at `range` (a pattern no two nearby positions share often).
        static func bytes(_ range: ClosedRange<Int>) -> Data {
            Data(range.map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 / 251) })
        }

        /// A 206 of the object holding `range`, as an origin would send it.
        static func partial(_ range: ClosedRange<Int>, headers: [(String, String)] = []) -> Scripted {
            Scripted(
                status: 206,
                headers: [
                    ("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound)/\(length)"), ("ETag", etag),
                    ("Cache-Control", "max-age=3600"),
                ] + headers, body: "", body64: bytes(range).base64EncodedString())
        }

        static func ranges(_ origin: Origin) throws -> [String] {
            try origin.requests().filter { $0.target == target }.map { request in
                request.headers.first { $0.0.lowercased() == "range" }?.1 ?? "-"
            }
        }

        @Test func aCappedAnswerHoldingTheClientsBytesIsServed() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            // A server that caps what it sends per request.
            try origin.script(Self.target, [Self.partial(0...4)], conditional: false)
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "0-4", origin.url(Self.target)])
            #expect(answer.status == 206, "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            #expect(answer.header("content-range") == "bytes 0-4/\(Self.length)")
            #expect(answer.body == Self.bytes(0...4))
            #expect(try Self.ranges(origin) == ["bytes=0-65535"], "the slice was asked for, once")
        }

        @Test func anotherRangeHoldingTheClientsBytesIsServedFromItsPositions() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            try origin.script(Self.target, [Self.partial(69_000...71_000)], conditional: false)
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "70000-70009", origin.url(Self.target)])
            #expect(answer.status == 206, "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            #expect(answer.header("content-range") == "bytes 70000-70009/\(Self.length)")
            #expect(answer.body == Self.bytes(70_000...70_009))
            #expect(try Self.ranges(origin) == ["bytes=65536-131071"])
        }

        @Test func anAnswerWithoutTheClientsBytesSendsItsRequestUpstreamAsItCame() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            try origin.script(Self.target, [Self.partial(50...99), Self.partial(0...99)], conditional: false)
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "0-99", origin.url(Self.target)])
            #expect(answer.status == 206, "\(answer.status) \(String(decoding: answer.body, as: UTF8.self))")
            #expect(answer.header("content-range") == "bytes 0-99/\(Self.length)")
            #expect(answer.body == Self.bytes(0...99))
            #expect(try Self.ranges(origin) == ["bytes=0-65535", "bytes=0-99"])
            // Neither answer was a slice: nothing is stored, so only-if-cached finds nothing.
            let cached = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "0-9", origin.url(Self.target)])
            #expect(cached.status == 504)
        }

        @Test func aMultipartAnswerToOneRangeIsNotTaken() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let multipart = Scripted(
                status: 206,
                headers: [("Content-Type", "multipart/byteranges; boundary=THIS"), ("ETag", Self.etag), ("Cache-Control", "max-age=3600")],
                body: "--THIS\r\nContent-Range: bytes 5-9/\(Self.length)\r\n\r\nabcde\r\n--THIS--\r\n")
            try origin.script(Self.target, [multipart, Self.partial(0...9)], conditional: false)
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "0-9", origin.url(Self.target)])
            #expect(answer.status == 206)
            #expect(answer.header("content-range") == "bytes 0-9/\(Self.length)")
            #expect(answer.body == Self.bytes(0...9))
            #expect(try Self.ranges(origin) == ["bytes=0-65535", "bytes=0-9"])
        }

        @Test func anObjectSmallerThanTheSliceIsTheWholeObject() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let url = origin.url(Self.target)
            // 50 bytes: whichever slice was asked for, the origin sends all of them.
            let small = Scripted(
                status: 206,
                headers: [("Content-Range", "bytes 0-49/50"), ("ETag", Self.etag), ("Cache-Control", "max-age=3600")], body: "",
                body64: Self.bytes(0...49).base64EncodedString())
            try origin.script(Self.target, [small], conditional: false)
            let past = try Curl.viaProxy(larder.proxy, ["-r", "70000-70009", url])
            #expect(past.status == 416 && past.header("content-range") == "bytes */50")
            let part = try Curl.viaProxy(larder.proxy, ["-r", "10-19", url])
            #expect(part.status == 206 && part.header("content-range") == "bytes 10-19/50")
            #expect(part.body == Self.bytes(10...19))
        }

        @Test func aWholeAnswerToALaterSliceCompletesTheAnswer() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let url = origin.url(Self.target)
            try origin.script(Self.target, [Self.partial(0...(Self.slice - 1))], conditional: false)
            let first = try Curl.viaProxy(larder.proxy, ["-r", "0-9", url])
            #expect(first.status == 206 && first.body == Self.bytes(0...9))
            try Self.waitUntilCached(larder, url, range: "0-9")
            // The origin now ignores Range: the second slice's request gets the whole object.
            let whole = Scripted(
                headers: [("ETag", Self.etag), ("Cache-Control", "max-age=3600")], body: "",
                body64: Self.bytes(0...(Self.length - 1)).base64EncodedString())
            try origin.script(Self.target, [whole], conditional: false)
            let answer = try Curl.viaProxy(larder.proxy, [url])
            #expect(answer.exitCode == 0, "\(answer.stderr)")
            #expect(answer.status == 200 && answer.header("content-length") == "\(Self.length)")
            #expect(answer.body == Self.bytes(0...(Self.length - 1)), "\(answer.body.count) bytes")
            #expect(try Self.ranges(origin) == ["bytes=0-65535", "bytes=65536-99999"], "the second slice, clipped to the length")
            // The whole answer was stored: the object is now answered from the cache.
            try Self.waitUntilCached(larder, url, range: "99990-99999")
            let again = try Curl.viaProxy(larder.proxy, [url])
            #expect(again.header("cache-status")?.contains("hit") == true, "\(again.header("cache-status") ?? "-")")
            #expect(again.body == Self.bytes(0...(Self.length - 1)))
            #expect(try Self.ranges(origin).count == 2)
        }

        @Test func aSliceShorterThanItsContentRangeIsNeverStored() throws {
            let origin = try RawOrigin()
            let larder = try Larder(config: Self.config)
            let url = origin.url(Self.target)
            // Chunked, so no length says the body ends early: 1,000 bytes of a 64 KiB range.
            let body = Self.bytes(0...999)
            var head = Array(
                ("HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-65535/\(Self.length)\r\nETag: \(Self.etag)\r\n"
                    + "Cache-Control: max-age=3600\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").utf8)
            head += Array(String(body.count, radix: 16).utf8) + [13, 10] + body + [13, 10] + Array("0\r\n\r\n".utf8)
            origin.script(Self.target, RawOrigin.Script(pieces: [head], pause: 0))
            let cut = try Curl.viaProxy(larder.proxy, ["-r", "0-65535", url])
            #expect(cut.exitCode != 0 || cut.status >= 500, "the answer cannot be complete")
            // Whatever was kept of it, none may stand for the slice.
            var found = false
            for _ in 0..<10 {
                let cached = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "60000-60009", url])
                if cached.status != 504 {
                    found = true
                    break
                }
                usleep(100_000)
            }
            #expect(!found, "a stored slice shorter than its range")
        }

        @Test func slicesCombineOnlyUnderAStrongValidator() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            // RFC 9110 §8.8.2.2: a Last-Modified as recent as the Date may stay the same across a
            // change; one an hour older may not. Neither answer has an ETag.
            for (target, modified, stored) in [("/weak", "{now}", false), ("/strong", "{now-3600}", true)] {
                var answer = Self.partial(0...(Self.slice - 1))
                answer.headers = answer.headers.filter { $0.0 != "ETag" } + [("Last-Modified", modified)]
                try origin.script(target, [answer], conditional: false)
                let url = origin.url(target)
                let first = try Curl.viaProxy(larder.proxy, ["-r", "0-9", url])
                #expect(first.status == 206 && first.body == Self.bytes(0...9), "\(target)")
                var cached = false
                for _ in 0..<20 where !cached {
                    cached = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "0-9", url]).status == 206
                    if !cached { usleep(50_000) }
                }
                #expect(cached == stored, "\(target): stored as a slice")
            }
        }

        /// RFC 9111 §3.3, §3.4: an answer for another range than the slice asked for keeps the
        /// whole slices inside it, and a later answer uses them with the slices fetched since.
        @Test func anotherRangesWholeSlicesAreStoredAndCombinedWithLaterParts() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let url = origin.url(Self.target)
            // Slice 1 (65536-99999) was asked for; the origin sends from byte 1,000 on.
            try origin.script(Self.target, [Self.partial(1000...(Self.length - 1))], conditional: false)
            let first = try Curl.viaProxy(larder.proxy, ["-r", "70000-70009", url])
            #expect(first.status == 206 && first.body == Self.bytes(70_000...70_009), "\(first.status)")
            // Slice 1 lay wholly inside: it is stored, so a range within it is a hit.
            try Self.waitUntilCached(larder, url, range: "80000-80009")
            let cached = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "90000-99999", url])
            #expect(cached.status == 206 && cached.body == Self.bytes(90_000...99_999))
            // Slice 0 was not whole in it: the whole object fetches slice 0 alone.
            try origin.script(Self.target, [Self.partial(0...(Self.slice - 1))], conditional: false)
            let whole = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", url])
            #expect(whole.status == 206 && whole.body == Self.bytes(0...(Self.length - 1)), "\(whole.status) \(whole.body.count)")
            #expect(whole.header("cache-status")?.contains("fwd=partial") == true, "\(whole.header("cache-status") ?? "-")")
            #expect(try Self.ranges(origin) == ["bytes=65536-131071", "bytes=0-65535"])
        }

        /// RFC 9111 §3.3, §3.4: the origin's 206 to the client's own Range, passed upstream as
        /// it came, keeps the whole slices inside it under its strong validator: a later range
        /// within them is a hit, and a later answer combines them with a slice fetched since.
        @Test func aRangePassedAsItCameKeepsTheWholeSlicesInsideIt() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let url = origin.url(Self.target)
            // The slice request's answer lacks the client's first byte: its Range goes upstream.
            try origin.script(Self.target, [Self.partial(50...99), Self.partial(0...70_000)], conditional: false)
            let first = try Curl.viaProxy(larder.proxy, ["-r", "0-70000", url])
            #expect(first.status == 206 && first.header("content-range") == "bytes 0-70000/\(Self.length)", "\(first.status)")
            #expect(first.body == Self.bytes(0...70_000), "\(first.body.count) bytes")
            #expect(try Self.ranges(origin) == ["bytes=0-65535", "bytes=0-70000"])
            // Slice 0 lay wholly inside it.
            try Self.waitUntilCached(larder, url, range: "10-19")
            let hit = try Curl.viaProxy(larder.proxy, ["-r", "60000-60009", url])
            #expect(hit.status == 206 && hit.body == Self.bytes(60_000...60_009), "\(hit.status)")
            #expect(hit.header("cache-status")?.contains("hit") == true, "\(hit.header("cache-status") ?? "-")")
            // The bytes past it were not kept: the whole object fetches slice 1 alone.
            try origin.script(Self.target, [Self.partial(65_536...(Self.length - 1))], conditional: false)
            let whole = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", url])
            #expect(whole.status == 206 && whole.body == Self.bytes(0...(Self.length - 1)), "\(whole.status) \(whole.body.count)")
            #expect(whole.header("cache-status")?.contains("fwd=partial") == true, "\(whole.header("cache-status") ?? "-")")
            #expect(try Self.ranges(origin) == ["bytes=0-65535", "bytes=0-70000", "bytes=65536-99999"])
        }

        /// RFC 9211 §2.5: `stored` says the answer the client got was stored. The first part of
        /// a capped slice starts that slice's entry, but when it lacks the client's first byte the
        /// client's Range goes upstream as it came, and an answer to it holding no whole slice is
        /// stored nowhere: its Cache-Status does not say stored.
        @Test func aPassedRangeStoringNothingDoesNotSayStored() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let url = origin.url(Self.target)
            try origin.script(Self.target, [Self.partial(0...9_999), Self.partial(30_000...40_000)], conditional: false)
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "30000-40000", url])
            #expect(answer.status == 206 && answer.body == Self.bytes(30_000...40_000), "\(answer.status) \(answer.body.count)")
            #expect(try Self.ranges(origin) == ["bytes=0-65535", "bytes=30000-40000"])
            let status = answer.header("cache-status") ?? "-"
            #expect(status.contains("fwd=") && !status.contains("stored"), "\(status)")
        }

        /// A request's no-cache takes it past the slice walk; for an object over
        /// `cache.range_whole_max` its Range then goes upstream as it came, and the whole slices
        /// inside the 206 are kept: the same range asked again without no-cache is a hit.
        @Test func aRangeOverRangeWholeMaxKeepsTheWholeSlicesInsideIt() throws {
            let origin = try Origin()
            // No fill of the whole object finishes for the cache once its client left it.
            let larder = try Larder(config: Self.config + "range_whole_max = \"50KiB\"\n[coalesce]\nfinish_abandoned_max = \"0KiB\"\n")
            let path = "/reloaded?ranges=1&size=8000000&cc=max-age=600"
            let url = origin.url(path)
            let expected = try origin.directBody(path)
            // The last two slices, far from what the whole object's fill got before it stopped.
            let range = 121 * Self.slice...7_999_999
            let first = try Curl.viaProxy(
                larder.proxy, ["-H", "Cache-Control: no-cache", "-r", "\(range.lowerBound)-\(range.upperBound)", url])
            #expect(first.status == 206 && first.body == expected[range], "\(first.status) \(first.body.count)")
            #expect(try Self.rangesSent(origin, path).last == "bytes=\(range.lowerBound)-\(range.upperBound)")
            try Self.waitUntilCached(larder, url, range: "7990000-7990009")
            let before = try origin.count(path)
            let again = try Curl.viaProxy(larder.proxy, ["-r", "\(range.lowerBound)-\(range.upperBound)", url])
            #expect(again.status == 206 && again.body == expected[range], "\(again.status) \(again.body.count)")
            #expect(again.header("cache-status")?.contains("hit") == true, "\(again.header("cache-status") ?? "-")")
            #expect(try origin.count(path) == before, "answered from the cache")
        }

        /// RFC 9111 §3.4: a part under another validator is never combined with what is stored.
        /// The answer whose first part is the new object stops short at the old slice and drops
        /// it, and the next answer is the new object's alone.
        @Test func aPartUnderAnotherValidatorIsNeverCombinedWithTheStoredOnes() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let path = "/versions?ranges=1&size=\(Self.length)&cc=max-age=600"
            let url = origin.url(path)
            #expect(try Curl.viaProxy(larder.proxy, ["-r", "70000-70009", url]).status == 206)
            try Self.waitUntilCached(larder, url, range: "80000-80009")
            // The object changes: other bytes, another ETag.
            try origin.bump("/versions")
            let expected = try origin.directBody(path)
            let mixed = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", url])
            #expect(mixed.exitCode != 0 || mixed.status >= 500, "never a complete answer of two objects")
            #expect(mixed.body.count < Self.length)
            let fresh = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", url])
            #expect(fresh.exitCode == 0 && fresh.status == 206, "\(fresh.status) \(fresh.stderr)")
            #expect(fresh.body == expected, "the new object's bytes only")
        }

        /// RFC 9110 §15.3.7.3: parts are combined only under one strong validator. An object
        /// without one may change between two requests, so an answer the first slice cannot
        /// complete is asked for whole, once: the client never gets bytes of two versions.
        @Test func anObjectWithoutAValidatorIsNeverCombinedFromSeveralAnswers() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let old = Data(repeating: 0x41, count: Self.length)
            let new = Data(repeating: 0x42, count: Self.length)
            func part(_ range: ClosedRange<Int>, of version: Data) -> Scripted {
                Scripted(
                    status: 206,
                    headers: [
                        ("Content-Range", "bytes \(range.lowerBound)-\(range.upperBound)/\(Self.length)"),
                        ("Cache-Control", "max-age=3600"),
                    ], body: "", body64: version[range].base64EncodedString())
            }
            // The first slice of one version, then the object changes: every later answer is the new one.
            try origin.script(Self.target, [part(0...(Self.slice - 1), of: old), part(0...(Self.length - 1), of: new)], conditional: false)
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", origin.url(Self.target)])
            #expect(answer.exitCode == 0 && answer.status == 206, "\(answer.status) \(answer.stderr)")
            #expect(answer.body == new, "\(answer.body.filter { $0 == 0x41 }.count) bytes of the old version")
            #expect(try Self.ranges(origin) == ["bytes=0-65535", "bytes=0-99999"])
        }

        /// Slices are stored by their index: after a reload changes `cache.slice_size`, those
        /// stored under the old size are not the new size's slices. They are fetched again,
        /// never served with a gap (every later answer cut short until they expire).
        @Test func slicesStoredUnderAnotherSizeAreFetchedAgainAfterAReload() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let path = "/resized?ranges=1&size=300000&cc=max-age=600"
            let url = origin.url(path)
            let expected = try origin.directBody(path)
            let first = try Curl.viaProxy(larder.proxy, ["-r", "0-299999", url])
            #expect(first.status == 206 && first.body == expected, "\(first.status) \(first.body.count)")
            try Self.waitUntilCached(larder, url, range: "290000-290009")
            try larder.reload("[cache]\nslice_size = \"96KiB\"\n")
            for (range, bytes) in [("0-299999", 0...299_999), ("100000-199999", 100_000...199_999)] {
                let answer = try Curl.viaProxy(larder.proxy, ["-r", range, url])
                #expect(answer.exitCode == 0 && answer.status == 206, "\(range): \(answer.status) \(answer.stderr)")
                #expect(answer.body == expected[bytes], "\(range): \(answer.body.count) bytes")
            }
        }

        /// A server that caps ranges: each answer short of the slice is followed by a request
        /// for the rest of it from the next byte, so the client gets every byte it asked for,
        /// before and after the head went out.
        @Test func aServerThatCapsRangesIsAskedForTheRestOfEachSlice() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let path = "/capped?ranges=1&size=\(Self.length)&cap=10000&cc=max-age=600"
            let expected = try origin.directBody(path)
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", origin.url(path)])
            #expect(answer.exitCode == 0, "\(answer.stderr)")
            #expect(answer.status == 206 && answer.header("content-range") == "bytes 0-99999/\(Self.length)")
            #expect(answer.body == expected, "\(answer.body.count) bytes")
            // (The test's own request for the expected bytes has no Range.)
            let sent = try Self.rangesSent(origin, path).filter { $0 != "-" }
            #expect(
                sent == [
                    "bytes=0-65535", "bytes=10000-65535", "bytes=20000-65535", "bytes=30000-65535", "bytes=40000-65535",
                    "bytes=50000-65535", "bytes=60000-65535", "bytes=65536-99999", "bytes=75536-99999", "bytes=85536-99999",
                    "bytes=95536-99999",
                ], "\(sent)")
        }

        /// A range that starts inside a slice, the first slice stored (it locates the object):
        /// the capped answer to the request for the whole slice ends before the client's first
        /// byte, so the rest of the slice is asked for, and the client gets every byte after
        /// its head instead of a head and a cut.
        @Test func aCappedAnswerShortOfARangeStartingInsideTheSliceIsFollowedByTheRest() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let path = "/capped?ranges=1&size=200000&cap=10000&cc=max-age=600"
            let url = origin.url(path)
            let expected = try origin.directBody(path)
            let first = try Curl.viaProxy(larder.proxy, ["-r", "0-65535", url])
            #expect(first.exitCode == 0 && first.body == expected[0...65_535], "\(first.status) \(first.body.count)")
            try Self.waitUntilCached(larder, url, range: "65530-65535")
            let before = try Self.rangesSent(origin, path).count
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "150000-", url])
            #expect(answer.exitCode == 0, "\(answer.stderr)")
            #expect(answer.status == 206 && answer.header("content-range") == "bytes 150000-199999/200000")
            #expect(answer.body == expected[150_000...], "\(answer.body.count) bytes")
            let sent = try Self.rangesSent(origin, path).dropFirst(before)
            #expect(Array(sent.prefix(3)) == ["bytes=131072-196607", "bytes=150000-196607", "bytes=160000-196607"], "\(sent)")
        }

        /// RFC 9111 §3.4: the parts a server that caps ranges sends of each slice are put back
        /// together under their one validator, so the next answer is a hit that asks nothing.
        /// With `chunked=1&slow=0.3` each part's answer ends a moment after its last byte (its
        /// last chunk comes late), so the request for the rest of the slice is answered before
        /// the part before it ended: the parts are put together all the same.
        @Test(arguments: ["", "&chunked=1&slow=0.3"])
        func aSliceSentInPartsIsStoredWhole(_ pacing: String) throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let path = "/capped?ranges=1&size=\(Self.length)&cap=10000\(pacing)&cc=max-age=600"
            let url = origin.url(path)
            let expected = try origin.directBody(path)
            let first = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", url])
            #expect(first.exitCode == 0 && first.status == 206 && first.body == expected, "\(first.status) \(first.body.count)")
            try Self.waitUntilCached(larder, url, range: "60000-60009")
            try Self.waitUntilCached(larder, url, range: "99990-99999")
            let before = try origin.count(path)
            let again = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", url])
            #expect(again.exitCode == 0 && again.status == 206 && again.body == expected, "\(again.status) \(again.body.count)")
            #expect(again.header("cache-status")?.contains("hit") == true, "\(again.header("cache-status") ?? "-")")
            #expect(try origin.count(path) == before, "answered from the cache")
        }

        /// Two clients of one capped slice, their parts interleaved: A's first part (0-29999)
        /// ended and its request for the rest waits at the origin when B's first part comes,
        /// capped shorter (0-19999) or under another ETag (an answer B's own request fields
        /// made differ), then B's request for its rest. B's parts neither replace nor spoil A's
        /// assembly (they store nothing), A's rest completes the slice, each client gets the
        /// bytes it was sent at their places, and the next answer is a hit on A's that asks
        /// nothing.
        @Test(arguments: [(0...19_999, Self.etag), (0...29_999, "\"other\"")])
        func anotherClientsPartsLeaveASliceBeingPutTogether(firstOfB: ClosedRange<Int>, etagOfB: String) throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            func part(_ range: ClosedRange<Int>, delay: Double, etag: String = Self.etag) -> Scripted {
                var answer = Self.partial(range)
                answer.headers = answer.headers.filter { $0.0 != "ETag" } + [("ETag", etag)]
                answer.delay = delay
                return answer
            }
            try origin.script(
                Self.target,
                [
                    part(0...29_999, delay: 0), part(30_000...65_535, delay: 1), part(firstOfB, delay: 0, etag: etagOfB),
                    part((firstOfB.upperBound + 1)...65_535, delay: 2, etag: etagOfB),
                ],
                conditional: false)
            let url = origin.url(Self.target)
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let clientA = try ChildProcess(
                "/usr/bin/curl",
                ["-s", "-S", "--max-time", "30", "--proxy", larder.proxy, "-r", "0-65535", "-o", directory + "/a", url])
            // B starts once A's request for the rest of the slice is at the origin.
            var asked = 0
            for _ in 0..<250 where asked < 2 {
                asked = try Self.ranges(origin).count
                usleep(20_000)
            }
            #expect(asked == 2, "A asked for its slice and then its rest")
            let clientB = try Curl.viaProxy(larder.proxy, ["-r", "0-65535", url])
            clientA.waitUntilExit()
            let bodyA = try Data(contentsOf: URL(fileURLWithPath: directory + "/a"))
            #expect(clientA.process.terminationStatus == 0 && bodyA == Self.bytes(0...65_535), "A: \(bodyA.count) \(clientA.stderr)")
            #expect(clientB.status == 206 && clientB.body == Self.bytes(0...65_535), "B: \(clientB.status) \(clientB.body.count)")
            #expect(clientB.header("etag") == etagOfB)
            let sent = try Self.ranges(origin)
            #expect(
                sent == ["bytes=0-65535", "bytes=30000-65535", "bytes=0-65535", "bytes=\(firstOfB.upperBound + 1)-65535"], "\(sent)")
            try Self.waitUntilCached(larder, url, range: "65530-65535")
            let again = try Curl.viaProxy(larder.proxy, ["-r", "0-65535", url])
            #expect(again.status == 206 && again.body == Self.bytes(0...65_535), "\(again.status) \(again.body.count)")
            #expect(again.header("etag") == Self.etag, "A's representation")
            #expect(again.header("cache-status")?.contains("hit") == true, "\(again.header("cache-status") ?? "-")")
            #expect(try Self.ranges(origin).count == 4, "answered from the cache")
        }

        /// Several clients of the same capped slices at once, their parts interleaved and ending
        /// late: each client gets exactly its bytes, and every slice is put together once, so
        /// the next answer is a hit that asks nothing.
        @Test func clientsOfTheSameCappedSlicesAtOnceStoreThemOnce() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let path = "/capped?ranges=1&size=\(Self.length)&cap=10000&chunked=1&slow=0.1&cc=max-age=600"
            let url = origin.url(path)
            let expected = try origin.directBody(path)
            let directory = Paths.temporaryDirectory()
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let clients = try (0..<4).map { index in
                try ChildProcess(
                    "/usr/bin/curl",
                    ["-s", "-S", "--max-time", "30", "--proxy", larder.proxy, "-r", "0-99999", "-o", directory + "/\(index)", url])
            }
            for (index, client) in clients.enumerated() {
                client.waitUntilExit()
                let body = try Data(contentsOf: URL(fileURLWithPath: directory + "/\(index)"))
                #expect(client.process.terminationStatus == 0 && body == expected, "\(index): \(body.count) \(client.stderr)")
            }
            try Self.waitUntilCached(larder, url, range: "60000-60009")
            try Self.waitUntilCached(larder, url, range: "99990-99999")
            let before = try origin.count(path)
            let again = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", url])
            #expect(again.exitCode == 0 && again.status == 206 && again.body == expected, "\(again.status) \(again.body.count)")
            #expect(again.header("cache-status")?.contains("hit") == true, "\(again.header("cache-status") ?? "-")")
            #expect(try origin.count(path) == before, "answered from the cache")
        }

        /// A part's answer cut short keeps the bytes it brought, each at its place, and the next
        /// client's parts continue from the first byte it lacked: the slice stored is exactly
        /// the object's bytes.
        @Test func aPartCutShortLeavesExactBytesForTheNextClient() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            var cut = Self.partial(0...29_999)
            cut.truncate = 10_000
            try origin.script(
                Self.target, [cut, Self.partial(0...29_999), Self.partial(30_000...65_535)], conditional: false)
            let url = origin.url(Self.target)
            let first = try Curl.viaProxy(larder.proxy, ["-r", "0-65535", url])
            #expect(first.exitCode != 0 && first.body.count <= 10_000, "\(first.status) \(first.body.count)")
            let second = try Curl.viaProxy(larder.proxy, ["-r", "0-65535", url])
            #expect(second.status == 206 && second.body == Self.bytes(0...65_535), "\(second.status) \(second.body.count)")
            try Self.waitUntilCached(larder, url, range: "65530-65535")
            let again = try Curl.viaProxy(larder.proxy, ["-r", "0-65535", url])
            #expect(again.status == 206 && again.body == Self.bytes(0...65_535), "\(again.status) \(again.body.count)")
            #expect(again.header("cache-status")?.contains("hit") == true, "\(again.header("cache-status") ?? "-")")
            #expect(try Self.ranges(origin) == ["bytes=0-65535", "bytes=0-65535", "bytes=30000-65535"])
        }

        /// The object changes between two parts of a slice: the parts are never put together,
        /// so the slice is not stored and no later answer mixes the two versions.
        @Test func partsUnderTwoValidatorsAreNeverPutTogether() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            func part(_ range: ClosedRange<Int>, etag: String) -> Scripted {
                var answer = Self.partial(range)
                answer.headers = answer.headers.filter { $0.0 != "ETag" } + [("ETag", etag)]
                return answer
            }
            // Slice 0 in two parts, the second under another ETag (same bytes: only the
            // validator says the object changed).
            try origin.script(
                Self.target, [part(0...39_999, etag: "\"one\""), part(40_000...65_535, etag: "\"two\"")], conditional: false)
            let url = origin.url(Self.target)
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "0-65535", url])
            #expect(answer.exitCode != 0 || answer.status >= 500 || answer.body.count < Self.slice, "never one answer of two")
            var stored = false
            for _ in 0..<10 where !stored {
                stored = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "0-9", url]).status == 206
                usleep(50_000)
            }
            #expect(!stored, "a slice put together from two validators")
        }

        /// An origin that answers one byte at a time neither holds the answer nor makes Larder
        /// ask without end: at most 16 requests for a slice, then the answer is cut short (its
        /// head is out) and a log line says why.
        @Test func anOriginSendingAByteAtATimeIsAskedABoundedNumberOfTimes() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let path = "/trickle?ranges=1&size=\(Self.length)&cap=1&cc=max-age=600"
            let answer = try Curl.viaProxy(larder.proxy, ["-r", "0-99999", origin.url(path)])
            #expect(answer.exitCode != 0 || answer.status >= 500, "the answer cannot be complete")
            #expect(answer.body.count < 100, "\(answer.body.count) bytes")
            #expect(try origin.count(path) == 16)
            try larder.child.waitForOutput { $0.contains("more than 16 parts") }
            // The proxy goes on serving.
            #expect(try Curl.viaProxy(larder.proxy, [origin.url("/after?cc=max-age=60")]).status == 200)
        }

        /// Without a disk tier no slice is stored (a slice is a disk entry of its own): a range
        /// of an object within `cache.range_whole_max` fetches it whole into the memory tier,
        /// a larger one passes the client's Range to the origin; either way the client gets
        /// exactly its bytes.
        @Test func withoutADiskTierARangeIsServedWholeOrPassedThrough() throws {
            let (cache, cleanup) = try IntegrationTests.Health.unusableCachePath()
            defer { try? FileManager.default.removeItem(atPath: cleanup) }
            let origin = try Origin()
            let larder = try Larder(
                config: "[disk]\nrequired = false\n[cache]\nslice_size = \"64KiB\"\nrange_whole_max = \"50KiB\"\n",
                cacheDirectory: cache)
            let small = "/small?ranges=1&size=40000&cc=max-age=600"
            let smallBody = try origin.directBody(small)
            let part = try Curl.viaProxy(larder.proxy, ["-r", "30000-30009", origin.url(small)])
            #expect(part.status == 206 && part.body == smallBody[30_000...30_009])
            let hit = try Curl.viaProxy(larder.proxy, ["-r", "10-19", origin.url(small)])
            #expect(hit.status == 206 && hit.body == smallBody[10...19] && hit.cacheStatus?.isMemoryHit == true)
            let large = "/large?ranges=1&size=\(Self.length)&cc=max-age=600"
            let largeBody = try origin.directBody(large)
            let passed = try Curl.viaProxy(larder.proxy, ["-r", "70000-70009", origin.url(large)])
            #expect(passed.status == 206 && passed.header("content-range") == "bytes 70000-70009/\(Self.length)")
            #expect(passed.body == largeBody[70_000...70_009])
            let sent = try origin.requests().filter { $0.target == large }.map { request in
                request.headers.first { $0.0.lowercased() == "range" }?.1 ?? "-"
            }
            #expect(sent.last == "bytes=70000-70009", "\(sent)")
            // The fill of the whole object may finish for the cache once the client left it;
            // the 206 is never what is stored.
            let cached = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "0-9", origin.url(large)])
            #expect(cached.status == 504 || cached.body == largeBody[0...9], "\(cached.status)")
        }

        /// The Range of each request the origin got for `path` ("-": none).
        static func rangesSent(_ origin: Origin, _ path: String) throws -> [String] {
            try origin.requests().filter { $0.target == path }.map { request in
                request.headers.first { $0.0.lowercased() == "range" }?.1 ?? "-"
            }
        }

        /// RFC 9110 §14.2: a GET with content goes upstream on a fetch of its own, whose answer
        /// no other request gets; its Range goes with it, so the client gets its range of the
        /// answer to its content (not the whole of it), and nothing is stored.
        @Test(arguments: [Self.config, "[cache]\nslice_size = \"0\"\n"])
        func aGetWithContentSendsItsRangeWithIt(config: String) throws {
            let origin = try Origin()
            let larder = try Larder(config: config)
            let path = "/search?echo=1&ranges=1&cc=max-age=600"
            let url = origin.url(path)
            // (curl sends no Range with -r when it sends content.)
            let answer = try Curl.viaProxy(
                larder.proxy, ["-X", "GET", "-H", "Content-Type:", "--data-binary", "0123456789ABCDEF", "-H", "Range: bytes=2-5", url])
            let sent = try Self.rangesSent(origin, path)
            #expect(answer.status == 206 && answer.header("content-range") == "bytes 2-5/16", "\(config): \(answer.status) \(sent)")
            #expect(answer.text == "2345", "\(config): \(answer.text)")
            #expect(sent == ["bytes=2-5"], "\(config)")
            let cached = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "2-5", url])
            #expect(cached.status == 504, "\(config): \(cached.status): an answer to one request's content was stored")
        }

        /// Review 71 F1: a client whose next byte lies past where a whole answer ended (its
        /// range, or the slice after the stored ones, served from a 200) was never told of the
        /// end: it hung until it gave up. Its answer ends now: a 502 before the head, cut
        /// short after it. Sliced (a stored slice, then a Range-ignoring origin that breaks
        /// off), a one-slice object whose range starts past the break, and without slicing.
        @Test(arguments: ["walk", "one slice", "no slices"])
        func anAnswerEndingBeforeTheClientsNextByteEndsTheClientsToo(shape: String) throws {
            let origin = try Origin()
            let larder = try Larder(config: shape == "no slices" ? "[cache]\nslice_size = \"0\"\n" : Self.config)
            var url = origin.url("/broken?ranges=1&size=50000&truncate=30000&cc=max-age=60")
            var range = ["-r", "40000-"]
            if shape == "no slices" {
                url = origin.url("/broken?size=200000&truncate=30000&cc=max-age=60")
                range = ["-r", "100000-"]
            } else if shape == "walk" {
                url = origin.url(Self.target)
                range = []
                let body = Self.bytes(0...(Self.length - 1)).base64EncodedString()
                let headers = [("ETag", Self.etag), ("Cache-Control", "max-age=3600")]
                // The first answer breaks off past the first slice (stored), the next before it.
                let answers = [70_000, 30_000].map { Scripted(headers: headers, body: "", truncate: $0, body64: body) }
                try origin.script(Self.target, answers, conditional: false)
                _ = try Curl.viaProxy(larder.proxy, [url])
                try Self.waitUntilCached(larder, url, range: "0-9")
            }
            let started = Date()
            let answer = try Curl.viaProxy(larder.proxy, ["--max-time", "20"] + range + [url], timeout: 25)
            let took = Date().timeIntervalSince(started)
            #expect(answer.exitCode != 28 && took < 15, "\(shape): ended after \(took) s, curl \(answer.exitCode)")
            #expect(answer.exitCode != 0 || answer.status == 502, "\(shape): \(answer.status), curl \(answer.exitCode)")
        }

        /// Review 71 F3: a Range-ignoring origin's 200 to a walk's slice request dropped every
        /// slice stored before rewriting them from its body, so a transfer that broke off (or
        /// was cut for a share) before it got there lost what the cache held, and each retry
        /// fetched more of the object again. A 200 of the same object (validator, length) keeps
        /// them.
        @Test func aWholeAnswerOfTheSameObjectKeepsTheStoredSlices() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let url = origin.url(Self.target)
            try origin.script(Self.target, [Self.partial(0...(Self.slice - 1))], conditional: false)
            #expect(try Curl.viaProxy(larder.proxy, ["-r", "0-9", url]).status == 206)
            try Self.waitUntilCached(larder, url, range: "0-9")
            let headers = [("Cache-Control", "max-age=3600")]
            func whole(etag: String, length: Int = Self.length) -> Scripted {
                Scripted(
                    headers: headers + [("ETag", etag)], body: "", truncate: 30_000,
                    body64: Self.bytes(0...(length - 1)).base64EncodedString())
            }
            // The walk takes the first slice from the cache and asks for the second; the 200
            // breaks off before the first slice's end.
            try origin.script(Self.target, [whole(etag: Self.etag)], conditional: false)
            let broken = try Curl.viaProxy(larder.proxy, ["--max-time", "20", url], timeout: 25)
            #expect(broken.exitCode != 0 && broken.exitCode != 28, "cut short: curl \(broken.exitCode)")
            let kept = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "0-9", url])
            #expect(kept.status == 206 && kept.body == Self.bytes(0...9), "the stored slice stays: \(kept.status)")
            // Under a Last-Modified alone (one-second resolution: two objects may share it),
            // nothing is kept: what a cut left of each would be combined (review 72 F2).
            let dated = origin.url("/dated")
            let modified = ("Last-Modified", "Tue, 01 Sep 2026 10:00:00 GMT")
            let firstSlice = Scripted(
                status: 206,
                headers: [("Content-Range", "bytes 0-\(Self.slice - 1)/\(Self.length)"), modified, ("Cache-Control", "max-age=3600")],
                body: "", body64: Self.bytes(0...(Self.slice - 1)).base64EncodedString())
            try origin.script("/dated", [firstSlice], conditional: false)
            #expect(try Curl.viaProxy(larder.proxy, ["-r", "0-9", dated]).status == 206)
            try Self.waitUntilCached(larder, dated, range: "0-9")
            let wholeDated = Scripted(
                headers: headers + [modified], body: "", truncate: 30_000, body64: Self.bytes(0...(Self.length - 1)).base64EncodedString())
            try origin.script("/dated", [wholeDated], conditional: false)
            _ = try Curl.viaProxy(larder.proxy, ["--max-time", "20", dated], timeout: 25)
            let datedSlice = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "0-9", dated])
            #expect(datedSlice.status == 504, "a Last-Modified alone keeps nothing: \(datedSlice.status)")
            // Another object drops them: another ETag, or the same ETag with another length
            // (an origin whose validator says nothing of the bytes), the walk there to see it
            // or not (its client left before the head; the fill goes on to store).
            let others = [
                ("/other-etag", "\"s2\"", Self.length, false), ("/other-length", Self.etag, Self.length - 1, false),
                ("/other-length-unseen", Self.etag, Self.length - 1, true),
            ]
            for (path, etag, length, leaves) in others {
                let other = origin.url(path)
                try origin.script(path, [Self.partial(0...(Self.slice - 1))], conditional: false)
                #expect(try Curl.viaProxy(larder.proxy, ["-r", "0-9", other]).status == 206)
                try Self.waitUntilCached(larder, other, range: "0-9")
                var answer = whole(etag: etag, length: length)
                if leaves { answer.delay = 2 }
                try origin.script(path, [answer], conditional: false)
                _ = try Curl.viaProxy(larder.proxy, ["--max-time", leaves ? "1" : "20", other], timeout: 25)
                if leaves { usleep(2_500_000) }
                let dropped = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", "0-9", other])
                #expect(dropped.status == 504, "\(path): \(dropped.status)")
                #expect(try origin.count(path) == 2, "\(path): the slice, then the whole answer once")
            }
        }

        /// Review 74 F2: a walk released from the slice fill it joined (another variant) fetched
        /// the slice on its own but still said `collapsed` in Cache-Status and the log.
        @Test func aWalkReleasedFromAnotherUsersSliceFillIsNotCollapsed() throws {
            let origin = try Origin()
            let larder = try Larder(config: Self.config)
            let url = origin.url(Self.target)
            var slice = Self.partial(0...(Self.slice - 1), headers: [("Vary", "Cookie")])
            slice.delay = 1
            try origin.script(Self.target, [slice], conditional: false)
            let alice = try ChildProcess(
                "/usr/bin/curl",
                ["-s", "-o", "/dev/null", "--max-time", "20", "--proxy", larder.proxy, "-H", "Cookie: u=alice", "-r", "0-9", url])
            usleep(300_000)
            let bob = try Curl.viaProxy(larder.proxy, ["-H", "Cookie: u=bob", "-r", "0-9", url])
            alice.process.waitUntilExit()
            #expect(bob.status == 206 && bob.body == Self.bytes(0...9))
            #expect(try Self.ranges(origin).count == 2, "Bob asked for his own")
            let status = bob.header("cache-status") ?? "-"
            #expect(!status.contains("collapsed"), "\(status)")
        }

        /// Waits (bounded) until `range` of `url` is answered from the cache.
        static func waitUntilCached(_ larder: Larder, _ url: String, range: String) throws {
            for _ in 0..<50 {
                let cached = try Curl.viaProxy(larder.proxy, ["-H", "Cache-Control: only-if-cached", "-r", range, url])
                if cached.status == 206 { return }
                usleep(50_000)
            }
            throw TestFailure("\(url) was not stored")
        }
    }
}
