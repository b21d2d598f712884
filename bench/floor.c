/* The floor of a module command, for bench/bench.py: FLOOR.EXISTS key item
 * opens the key, looks at its type and replies 0, doing nothing else. What a
 * module command costs beyond this is its own work; bench reports each
 * module's BF.EXISTS as a ratio to it, measured back to back on one server. */
#include "redismodule.h"

static int FloorExists(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    if (argc != 3) return RedisModule_WrongArity(ctx);
    RedisModuleKey *key = RedisModule_OpenKey(ctx, argv[1], REDISMODULE_READ);
    /* Looks at the key as a module command must; the item's bytes are not
     * read (a pointer fetch), so the floor is a touch lower than any real
     * command's. */
    int type = RedisModule_KeyType(key);
    RedisModule_CloseKey(key);
    (void)type;
    return RedisModule_ReplyWithLongLong(ctx, 0);
}

int RedisModule_OnLoad(RedisModuleCtx *ctx, RedisModuleString **argv, int argc) {
    (void)argv;
    (void)argc;
    if (RedisModule_Init(ctx, "floor", 1, REDISMODULE_APIVER_1) == REDISMODULE_ERR) return REDISMODULE_ERR;
    return RedisModule_CreateCommand(ctx, "floor.exists", FloorExists, "readonly fast", 1, 1, 1);
}
