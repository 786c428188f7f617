import LarderHTTP
import Testing

@Suite(.timeLimit(.minutes(1))) struct CacheStatusMemberTests {
    @Test func readsTheLastMemberOfTheNamedCache() throws {
        let values = ["origin-cdn; hit", "larder; fwd=uri-miss; stored; ttl=60"]
        let member = try #require(CacheStatusMember.last(named: "larder", in: values))
        #expect(!member.isHit)
        #expect(member.parameter("fwd") == "uri-miss" && member.parameter("stored") == "" && member.parameter("ttl") == "60")
        #expect(CacheStatusMember.last(named: "origin-cdn", in: values)?.isHit == true)
        #expect(CacheStatusMember.last(named: "larder", in: ["other; hit"]) == nil)
        // Several members in one field: the last is the one nearest the client.
        #expect(CacheStatusMember.last(named: "larder", in: ["larder; fwd=uri-miss, larder; hit; detail=disk"])?.isHit == true)
    }

    @Test func quotedValuesKeepTheirSeparators() throws {
        let member = try #require(
            CacheStatusMember.last(named: "larder", in: [#"larder; fwd=uri-miss; key="debian:/a;hit,b"; detail="x \"y\"""#]))
        #expect(!member.isHit, "a ';hit' inside the key is no parameter")
        #expect(member.parameter("key") == "debian:/a;hit,b")
        #expect(member.parameter("detail") == #"x "y""#)
        #expect(member.parameters.count == 3)
    }
}
