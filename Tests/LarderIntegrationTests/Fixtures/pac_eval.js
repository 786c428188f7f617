// Runs a PAC file in node's JavaScript engine and prints, for each URL given, the URL and
// what FindProxyForURL returns for it, one line each.
//   node pac_eval.js FILE URL...
// The PAC helper functions are the ones browsers provide; any DNS lookup throws, so a PAC
// file that would resolve a name (dnsResolve, myIpAddress, isInNet on a name) fails here.
"use strict";
const fs = require("fs");
const vm = require("vm");

function address(text) {
    const parts = text.split(".");
    if (parts.length !== 4 || parts.some((p) => !/^[0-9]+$/.test(p) || Number(p) > 255)) {
        throw new Error("a name would be resolved: " + text);
    }
    return parts.reduce((sum, p) => sum * 256 + Number(p), 0);
}

const sandbox = {
    isPlainHostName: (host) => host.indexOf(".") < 0,
    dnsDomainIs: (host, domain) => host.length >= domain.length && host.substring(host.length - domain.length) === domain,
    localHostOrDomainIs: (host, hostdom) => host === hostdom || hostdom.lastIndexOf(host + ".", 0) === 0,
    shExpMatch: (text, pattern) =>
        new RegExp("^" + pattern.replace(/[.+^${}()|[\]\\]/g, "\\$&").replace(/\*/g, ".*").replace(/\?/g, ".") + "$").test(text),
    isInNet: (host, network, mask) => {
        const m = address(mask);
        return (address(host) & m) >>> 0 === (address(network) & m) >>> 0;
    },
    isResolvable: () => { throw new Error("isResolvable resolves a name"); },
    dnsResolve: () => { throw new Error("dnsResolve resolves a name"); },
    myIpAddress: () => { throw new Error("myIpAddress resolves a name"); },
};
vm.createContext(sandbox);
vm.runInContext(fs.readFileSync(process.argv[2], "utf8"), sandbox, { filename: process.argv[2] });
for (const url of process.argv.slice(3)) {
    // Browsers pass the host without the URL's IPv6 brackets.
    const host = new URL(url).hostname.replace(/^\[/, "").replace(/\]$/, "");
    console.log(url + " " + sandbox.FindProxyForURL(url, host));
}
