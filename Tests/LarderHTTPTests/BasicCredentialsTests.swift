import Testing

@testable import LarderHTTP

@Suite(.timeLimit(.minutes(1))) struct BasicCredentialsTests {
    @Test func parsesTheRFC7617Example() {
        // RFC 7617 §2: "Aladdin" / "open sesame".
        let credentials = BasicCredentials(header: "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ==")
        #expect(credentials == BasicCredentials(user: "Aladdin", password: "open sesame"))
    }

    @Test func schemeIsCaseInsensitiveAndPasswordMayHoldColons() {
        let encoded = BasicCredentials(user: "u", password: "a:b:c").headerValue.dropFirst("Basic".count)
        let credentials = BasicCredentials(header: "bAsIc" + encoded)
        #expect(credentials?.password == "a:b:c")
    }

    @Test(arguments: [
        "Bearer QWxhZGRpbjpvcGVuIHNlc2FtZQ==",  // another scheme
        "Basic",  // no credentials
        "Basic QWxhZGRpbjpvcGVuIHNlc2FtZQ",  // padding missing
        "Basic QWxhZGRp=jpvcGVuIHNlc2FtZQ==",  // padding in the middle
        "Basic QWxhZGRpbjpvcGVuIHNlc2FtZR==",  // non-zero bits in the padding
        "Basic !!!!",  // not base64
        "Basic YWxhZGRpbg==",  // no colon
        "Basic AQI6cHc=",  // control characters in the user-id
        "Basic //79:cHc=",  // colon inside the base64
    ])
    func rejectsMalformedCredentials(_ header: String) {
        #expect(BasicCredentials(header: header) == nil)
    }

    @Test func encodingRoundTripsEveryLength() {
        for length in 0..<40 {
            let password = String(repeating: "p", count: length) + "é"
            let header = BasicCredentials(user: "user", password: password).headerValue
            #expect(BasicCredentials(header: header)?.password == password)
        }
    }
}
