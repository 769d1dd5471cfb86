# embedstack_handle_tag(<target> <kind> <package.json>): the napi type tag on the handles
# this addon returns (tables, caches) names the addon and its version. Both addons
# compile the same N-API layer, so with one fixed tag a table handle of the CPU addon
# passed the CUDA addon's check (or a handle of another installed version, whose
# TableHolder may be laid out differently) and ran through the wrong compiled copy.
# With a tag per addon and version such a handle is refused as INVALID_TYPE.
# Defines EMBEDSTACK_HANDLE_TAG (uint64 literal): the first 64 bits of
# SHA-1("<kind>@<version>"), a pure function of its inputs, so rebuilds agree.
function(embedstack_handle_tag target kind package_json)
  file(READ ${package_json} pkg)
  string(JSON version GET ${pkg} version)
  string(SHA1 digest "${kind}@${version}")
  string(SUBSTRING ${digest} 0 16 word)
  target_compile_definitions(${target} PRIVATE EMBEDSTACK_HANDLE_TAG=0x${word}ULL)
endfunction()
